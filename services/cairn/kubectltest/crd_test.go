package kubectltest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

const kilnCRDYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kilns.pottery.example.com
spec:
  group: pottery.example.com
  scope: Namespaced
  names:
    plural: kilns
    singular: kiln
    kind: Kiln
    shortNames: [kl]
    categories: [pottery]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Fuel
      type: string
      jsonPath: .spec.fuel
    - name: Max-Temp
      type: integer
      jsonPath: .spec.maxTemperature
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the kiln is and how hot it gets.
            required: [fuel]
            properties:
              fuel:
                type: string
                description: What the kiln burns.
                enum: [gas, wood, electric]
              maxTemperature:
                type: integer
                description: Hottest firing, in degrees Celsius.
                maximum: 1400
                default: 1200
              replicas:
                type: integer
                minimum: 0
          status:
            type: object
            properties:
              replicas:
                type: integer
`

const kilnYAML = `apiVersion: pottery.example.com/v1
kind: Kiln
metadata:
  name: k1
spec:
  fuel: gas
  replicas: 1
  glaze: celadon
`

const badKilnYAML = `apiVersion: pottery.example.com/v1
kind: Kiln
metadata:
  name: k2
spec:
  fuel: coal
`

// TestKubectlCRD drives a CustomResourceDefinition with kubectl as it
// is: apply the definition and an object, get with the printer columns,
// short name and category, explain from the published schema, patch,
// scale, server-side apply, label and field selectors, a watch resumed
// from a resourceVersion, the history of the object (cairn timeline,
// audit, get --at), and delete the definition with its objects.
func TestKubectlCRD(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	kubectl := cairntest.KubectlPath(t)
	bin := cairntest.Build(t)
	dir := t.TempDir()
	c := startCluster(t, t, bin, kubectl, filepath.Join(dir, "data"), cairntest.FreeAddr(t), filepath.Join(dir, "home"))
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	crd, obj, bad := write("crd.yaml", kilnCRDYAML), write("kiln.yaml", kilnYAML), write("bad.yaml", badKilnYAML)

	if got := c.OK(t, "apply", "-f", crd); strings.TrimSpace(got) != "customresourcedefinition.apiextensions.k8s.io/kilns.pottery.example.com created" {
		t.Errorf("apply crd = %q", got)
	}
	c.OK(t, "wait", "--for=condition=Established", "--timeout=30s", "crd/kilns.pottery.example.com")
	wantRow(t, wantHeader(t, c.OK(t, "get", "crd"), "NAME", "CREATED", "AT"), "kilns.pottery.example.com")

	if got := c.OK(t, "apply", "-f", obj); strings.TrimSpace(got) != "kiln.pottery.example.com/k1 created" {
		t.Errorf("apply kiln = %q", got)
	}
	k1Created := c.OK(t, "get", "kiln", "k1", "-o", "jsonpath={.metadata.resourceVersion}")
	for _, args := range [][]string{{"get", "kilns"}, {"get", "kl"}, {"get", "pottery"}} {
		wantRow(t, wantHeader(t, c.OK(t, args...), "NAME", "FUEL", "MAX-TEMP", "REPLICAS"), "k1", "gas", "1200", "1")
	}
	if got := c.OK(t, "get", "kiln", "k1", "-o", "jsonpath={.spec}"); got != `{"fuel":"gas","maxTemperature":1200,"replicas":1}` {
		t.Errorf("spec = %s, want the default and no unknown glaze", got)
	}
	out := c.OK(t, "explain", "kiln.spec")
	for _, w := range []string{"KIND:       Kiln", "GROUP:      pottery.example.com", "What the kiln is and how hot it gets.",
		"fuel\t<string> -required-", "What the kiln burns.", "maxTemperature\t<integer>"} {
		if !strings.Contains(out, w) {
			t.Errorf("explain kiln.spec lacks %q:\n%s", w, out)
		}
	}
	if stderr := c.Fails(t, "apply", "-f", bad); !strings.Contains(stderr, `spec.fuel: Unsupported value: "coal": supported values: "gas", "wood", "electric"`) {
		t.Errorf("bad kiln: %s", stderr)
	}

	// As in kube, custom objects take no strategic merge patch, kubectl's
	// default.
	if stderr := c.Fails(t, "patch", "kiln", "k1", "-p", `{"spec":{"fuel":"wood"}}`); !strings.Contains(stderr,
		"application/strategic-merge-patch+json is not supported by pottery.example.com/v1, Kind=Kiln: the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml") {
		t.Errorf("strategic patch: %s", stderr)
	}
	c.OK(t, "patch", "kiln", "k1", "--type=merge", "-p", `{"spec":{"fuel":"wood"}}`)
	if got := strings.TrimSpace(c.OK(t, "scale", "kiln", "k1", "--replicas=3")); got != "kiln.pottery.example.com/k1 scaled" {
		t.Errorf("scale = %q", got)
	}
	if got := c.OK(t, "get", "kiln", "k1", "-o", "jsonpath={.spec.fuel} {.spec.replicas}"); got != "wood 3" {
		t.Errorf("after patch and scale = %q", got)
	}
	// Server-side apply merges with the schema: the unknown glaze, which
	// a create prunes, is a field the apply cannot own, as in kube.
	// kubectl edit sends a merge patch for a custom object.
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	edit := c.Command(ctx, "edit", "kiln", "k1")
	edit.Env = append(edit.Env, "KUBE_EDITOR=sed -i s/fuel:\\ wood/fuel:\\ electric/")
	if out, err := edit.CombinedOutput(); err != nil || !strings.Contains(string(out), "kiln.pottery.example.com/k1 edited") {
		t.Errorf("kubectl edit: %v: %s", err, out)
	}
	if got := c.OK(t, "get", "kiln", "k1", "-o", "jsonpath={.spec.fuel}"); got != "electric" {
		t.Errorf("fuel after edit = %q", got)
	}
	ssa := write("ssa.yaml", strings.Replace(strings.Replace(kilnYAML, "name: k1", "name: k3", 1), "  glaze: celadon\n", "", 1))
	if got := strings.TrimSpace(c.OK(t, "apply", "--server-side", "-f", ssa)); got != "kiln.pottery.example.com/k3 serverside-applied" {
		t.Errorf("apply --server-side = %q", got)
	}
	if got := c.OK(t, "get", "kiln", "k3", "-o", "jsonpath={.metadata.managedFields[0].manager}"); got != "kubectl" {
		t.Errorf("managed fields manager = %q", got)
	}
	created := c.OK(t, "get", "kiln", "k3", "-o", "jsonpath={.metadata.resourceVersion}")

	// Label and field selectors, and a watch resumed from a past
	// resourceVersion, as kubectl sends them.
	c.OK(t, "label", "kiln", "k1", "shop=north")
	wantOnly := func(out, name string) {
		t.Helper()
		rows := strings.Split(strings.TrimSpace(out), "\n")
		if len(rows) != 2 || !strings.HasPrefix(rows[1], name+" ") {
			t.Errorf("want only %s:\n%s", name, out)
		}
	}
	wantOnly(c.OK(t, "get", "kl", "-l", "shop=north"), "k1")
	wantOnly(c.OK(t, "get", "kl", "--field-selector", "metadata.name=k3"), "k3")
	wantOnly(c.OK(t, "get", "kl", "--field-selector", "metadata.namespace=default,metadata.name!=k3"), "k1")
	watched := c.OK(t, "get", "--raw", "/apis/pottery.example.com/v1/namespaces/default/kilns?watch=true&timeoutSeconds=2&fieldSelector=metadata.name%3Dk1&resourceVersion="+k1Created)
	if n := strings.Count(watched, `"type":"MODIFIED"`); n < 4 || strings.Contains(watched, `"type":"ADDED"`) { // patch, scale, edit, label
		t.Errorf("watch of k1 from its creation saw %d modifications:\n%s", n, watched)
	}

	// The log holds the custom objects like any other.
	kc := []string{"KUBECONFIG=" + c.Up.Kubeconfig()}
	cairn := func(args ...string) cairntest.Result { return cairntest.RunIn(t, callTimeout, dir, kc, bin, args...) }
	eventuallyOut(t, "cairn timeline kiln/k1", func() (string, error) { return resultOut(cairn("timeline", "kiln/k1")) },
		"Kiln default/k1", "cairn-admin")
	eventuallyOut(t, "cairn audit --kind Kiln", func() (string, error) { return resultOut(cairn("audit", "--kind", "Kiln")) },
		"default/k1", "default/k3", "patch")
	eventuallyOut(t, "cairn get kiln k3 --at", func() (string, error) {
		return resultOut(cairn("get", "kiln", "k3", "-n", "default", "--at", created))
	}, `"fuel": "gas"`)

	if got := strings.TrimSpace(c.OK(t, "delete", "crd", "kilns.pottery.example.com")); got != `customresourcedefinition.apiextensions.k8s.io "kilns.pottery.example.com" deleted` {
		t.Errorf("delete crd = %q", got)
	}
	// kubectl's discovery cache may still name kilns: then the server's
	// 404 is what it prints.
	if stderr := c.Fails(t, "get", "kilns"); !strings.Contains(stderr, `the server doesn't have a resource type "kilns"`) &&
		!strings.Contains(stderr, "Error from server (NotFound)") {
		t.Errorf("get kilns after delete: %s", stderr)
	}
	// Defined again, the kind has no objects left.
	c.OK(t, "apply", "-f", crd)
	c.OK(t, "wait", "--for=condition=Established", "--timeout=30s", "crd/kilns.pottery.example.com")
	r := c.Run(t, "get", "kilns")
	if r.Err != nil || !strings.Contains(r.Stderr, "No resources found in default namespace.") {
		t.Errorf("get kilns after re-creating the definition: %s", r)
	}
	c.stop(t)
}

func resultOut(r cairntest.Result) (string, error) {
	if r.Err != nil {
		return "", errors.New(r.String())
	}
	return r.Stdout, nil
}

// eventuallyOut polls f until its output holds every want (the history
// follows the log).
func eventuallyOut(t *testing.T, what string, f func() (string, error), want ...string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		out, err := f()
		last = out
		if err != nil {
			last = err.Error()
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(out, w)
		}
		if ok {
			return
		}
	}
	t.Errorf("%s: want %q in:\n%s", what, want, last)
}
