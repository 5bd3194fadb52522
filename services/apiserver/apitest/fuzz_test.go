package apitest

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// The fuzz tests feed random bodies to the write handlers through HTTP.
// Plain `go test` runs the seeds only; run more with e.g.
//
//	go test ./services/apiserver/apitest -run '^$' -fuzz FuzzCreatePod -fuzztime 60s
//
// Every answer must be a JSON object; an error must be a Status whose code
// is the HTTP code, never a 5xx, and must leave etcd untouched; a success
// must be exactly one etcd write whose revision is the resourceVersion
// returned.

var createPodSeeds = []struct {
	body string
	yaml bool
}{
	{`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"seed"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, false},
	{`{"metadata":{"generateName":"gen-"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, false},
	{"apiVersion: v1\nkind: Pod\nmetadata:\n  name: seed-yaml\nspec:\n  containers:\n  - name: c\n    image: busybox\n", true},
	{`{"metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, false},
	{`{"metadata":{"name":"noc"},"spec":{}}`, false},
	{`{"metadata":{"name":"dup"},"spec":{"containers":[{"name":"c","image":"i"},{"name":"c","image":"i"}]}}`, false},
	{`{"metadata":{"name":"ports"},"spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":99999}]}]}}`, false},
	{`{"metadata":{"name":"res"},"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"x"}}}]}}`, false},
	{`{"metadata":{"name":"st"},"spec":{"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Running"}}`, false},
	{`{"metadata":{"name":"ns","namespace":"other"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, false},
	{`{"metadata":{"name":"lbl","labels":{"a/b/c":"x"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`, false},
	{`{"kind":"Deployment","apiVersion":"apps/v1"}`, false},
	{`{"metadata":{"name":1e400}}`, false},
	{`{"metadata":{"name":"x","creationTimestamp":"yesterday"}}`, false},
	{`{"metadata":{"name":"x","uid":"u","resourceVersion":"abc","deletionTimestamp":"2020-01-01T00:00:00Z"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, false},
	{`{"spec":{"containers":[{"name":"c","image":"i","env":[{"name":"A","valueFrom":{}}]}]}}`, false},
	{`{"metadata":{"name":"vol"},"spec":{"volumes":[{"name":"v"}],"containers":[{"name":"c","image":"i","volumeMounts":[{"name":"w","mountPath":"/x"}]}]}}`, false},
	{`null`, false},
	{`[]`, false},
	{`"pod"`, false},
	{``, false},
	{`{`, false},
	{"\xff\xfe", false},
	{"a: [", true},
	{"- 1\n", true},
	{"? [a, b]\n: c\n", true},
	{"metadata: &a\n  name: *a\n", true},
	{"{}", true},
}

func FuzzCreatePod(f *testing.F) {
	for _, s := range createPodSeeds {
		f.Add([]byte(s.body), s.yaml)
	}
	env := controlplanetest.Start(f)
	f.Fuzz(func(t *testing.T, body []byte, asYAML bool) {
		ct := "application/json"
		if asYAML {
			ct = "application/yaml"
		}
		checkWrite(t, env, call{method: "POST", path: podsPath, contentType: ct, body: body})
	})
}

var patchSeeds = []struct {
	patch string
	typ   uint8
}{
	{`{"spec":{"replicas":3}}`, mergePatch},
	{`{"spec":{"replicas":-1}}`, mergePatch},
	{`{"spec":{"replicas":"three"}}`, mergePatch},
	{`{"metadata":{"labels":{"tier":"web"}}}`, mergePatch},
	{`{"metadata":{"name":"other"}}`, mergePatch},
	{`{"metadata":{"namespace":"kube-system"}}`, mergePatch},
	{`{"metadata":{"resourceVersion":"1"}}`, mergePatch},
	{`{"metadata":{"uid":"changed"}}`, mergePatch},
	{`{"spec":{"selector":{"matchLabels":{"app":"other"}}}}`, mergePatch},
	{`{"spec":{"template":{"spec":{"containers":null}}}}`, mergePatch},
	{`{"kind":"Pod"}`, mergePatch},
	{`null`, mergePatch},
	{`[]`, mergePatch},
	{`[{"op":"replace","path":"/spec/replicas","value":2}]`, jsonPatch},
	{`[{"op":"remove","path":"/spec/template"}]`, jsonPatch},
	{`[{"op":"test","path":"/spec/replicas","value":99}]`, jsonPatch},
	{`[{"op":"add","path":"/metadata/labels/x~1y","value":"z"}]`, jsonPatch},
	{`[{"op":"move","from":"/spec","path":"/spec/x"}]`, jsonPatch},
	{`[{"op":"copy","from":"/metadata","path":"/spec/template/metadata"}]`, jsonPatch},
	{`[{"op":"add","path":"/spec/template/spec/containers/-","value":{"name":"d","image":"i"}}]`, jsonPatch},
	{`[{"op":"replace","path":"/spec/template/spec/containers/9/image","value":"x"}]`, jsonPatch},
	{`[{"op":"bogus"}]`, jsonPatch},
	{`{"op":"add"}`, jsonPatch},
	{`{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`, strategicPatch},
	{`{"spec":{"template":{"spec":{"containers":[{"name":"c","$patch":"delete"}]}}}}`, strategicPatch},
	{`{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"x"}],"containers":[{"name":"x","image":"i"}]}}}}`, strategicPatch},
	{`{"$patch":"replace"}`, strategicPatch},
	{`{"$patch":"delete"}`, strategicPatch},
	{`{"spec":{"$retainKeys":["replicas"],"replicas":1}}`, strategicPatch},
	{`{"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}}`, strategicPatch},
	{`{"spec":{"strategy":{"type":"Recreate","rollingUpdate":{"maxSurge":"x%"}}}}`, strategicPatch},
	{`{`, strategicPatch},
	{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: fuzz}\nspec: {replicas: 2}\n", applyPatch},
	{`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"fuzz"},"spec":{"template":{"spec":{"containers":[{"name":"c"}]}}}}`, applyPatch},
	{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: fuzz, labels: {a: [1]}}\n", applyPatch},
	{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: fuzz}\nspec: {template: {spec: {containers: [{image: x}]}}}\n", applyPatch},
	{"kind: [", applyPatch},
}

const (
	jsonPatch uint8 = iota
	mergePatch
	strategicPatch
	applyPatch
)

var patchTypes = []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", applyPatchCT}

func FuzzPatchDeployment(f *testing.F) {
	for _, s := range patchSeeds {
		f.Add([]byte(s.patch), s.typ)
	}
	env := controlplanetest.Start(f)
	ctx := ctxFor(f, 30*time.Second)
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, testDeployment("fuzz", 1), metav1.CreateOptions{}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, patch []byte, typ uint8) {
		ct := patchTypes[int(typ)%len(patchTypes)]
		path := "/apis/apps/v1/namespaces/default/deployments/fuzz"
		if ct == applyPatchCT {
			path += "?fieldManager=fuzz&force=true"
		}
		checkWrite(t, env, call{method: "PATCH", path: path, contentType: ct, body: patch})
	})
}

// checkWrite sends one write and checks the invariants above.
func checkWrite(t *testing.T, env *controlplanetest.Env, c call) {
	before := etcdRev(t, env)
	r := do(t, env, c)
	after := etcdRev(t, env)
	var obj map[string]any
	if err := json.Unmarshal(r.body, &obj); err != nil || obj == nil {
		t.Fatalf("%d reply is not a JSON object (%v): %q", r.code, err, truncate(r.body))
	}
	if r.code >= 200 && r.code < 300 {
		md, _ := obj["metadata"].(map[string]any)
		rvs, _ := md["resourceVersion"].(string)
		rv, err := strconv.ParseInt(rvs, 10, 64)
		switch {
		case err != nil:
			t.Fatalf("%d reply without a resourceVersion: %s", r.code, truncate(r.body))
		case after == before+1 && rv == after:
		case after == before && rv <= before:
			// A no-op (a patch that changes nothing) is not committed.
		default:
			t.Fatalf("%d with resourceVersion %d: etcd revision went from %d to %d", r.code, rv, before, after)
		}
		return
	}
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" || int(st.Code) != r.code {
		t.Fatalf("%d reply is not a matching Status: %s", r.code, truncate(r.body))
	}
	if r.code >= 500 {
		t.Fatalf("bad input got %d: %s (input %q)", r.code, truncate(r.body), truncate(c.body))
	}
	if after != before {
		t.Fatalf("refused write (%d %s) moved etcd from %d to %d", r.code, st.Reason, before, after)
	}
}
