package apitest

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

var kilnGVR = schema.GroupVersionResource{Group: "pottery.example.com", Version: "v1", Resource: "kilns"}

// kilnCRD reads testdata/kiln-crd.yaml.
func kilnCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile("testdata/kiln-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// establish creates crd and waits until it is Established and its kinds
// are served.
func establish(t testing.TB, env *controlplanetest.Env, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	cs := apiextensionsclient.NewForConfigOrDie(env.Config)
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", crd.Name, err)
	}
	for {
		got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if apihelpers.IsCRDConditionTrue(got, apiextensionsv1.Established) {
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD %s not established: %+v", crd.Name, got.Status.Conditions)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func kiln(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pottery.example.com/v1", "kind": "Kiln",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"shop": "north"}},
		"spec":     spec,
	}}
	return u
}

func TestCRDStatusAndDiscovery(t *testing.T) {
	env := controlplanetest.Start(t)
	crd := establish(t, env, kilnCRD(t))
	for _, want := range []struct {
		typ    apiextensionsv1.CustomResourceDefinitionConditionType
		reason string
	}{{apiextensionsv1.NamesAccepted, "NoConflicts"}, {apiextensionsv1.Established, "InitialNamesAccepted"}} {
		c := apihelpers.FindCRDCondition(crd, want.typ)
		if c == nil || c.Status != apiextensionsv1.ConditionTrue || c.Reason != want.reason {
			t.Errorf("condition %s = %+v, want True %s", want.typ, c, want.reason)
		}
	}
	if n := crd.Status.AcceptedNames; n.Plural != "kilns" || n.Kind != "Kiln" || n.ListKind != "KilnList" || !slices.Equal(n.ShortNames, []string{"kl"}) {
		t.Errorf("acceptedNames = %+v", n)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions = %v", crd.Status.StoredVersions)
	}

	rl, err := env.Client.Discovery().ServerResourcesForGroupVersion("pottery.example.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rl.APIResources {
		names = append(names, r.Name)
		if r.Name == "kilns" && (!r.Namespaced || r.Kind != "Kiln" || !slices.Equal(r.ShortNames, []string{"kl"}) || !slices.Equal(r.Categories, []string{"pottery"})) {
			t.Errorf("kilns = %+v", r)
		}
	}
	if want := []string{"kilns", "kilns/status", "kilns/scale"}; !slices.Equal(names, want) { // kube's order
		t.Errorf("resources = %v, want %v", names, want)
	}
	groups, err := env.Client.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range groups.Groups {
		if g.Name == "pottery.example.com" {
			found = true
			if g.PreferredVersion.Version != "v1" || len(g.Versions) != 2 {
				t.Errorf("group = %+v", g)
			}
		}
	}
	if !found {
		t.Error("discovery lists no group pottery.example.com")
	}

	// Aggregated discovery (what kubectl reads first) lists the kind too.
	r := do(t, env, call{method: http.MethodGet, path: "/apis",
		header: http.Header{"Accept": {"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}}})
	var agg apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(r.body, &agg); err != nil || r.code != http.StatusOK {
		t.Fatalf("aggregated discovery: %d %v", r.code, err)
	}
	var kilns *apidiscoveryv2.APIResourceDiscovery
	for _, g := range agg.Items {
		if g.Name != "pottery.example.com" {
			continue
		}
		for _, v := range g.Versions {
			for i := range v.Resources {
				if v.Version == "v1" && v.Resources[i].Resource == "kilns" {
					kilns = &v.Resources[i]
				}
			}
		}
	}
	if kilns == nil {
		t.Fatalf("aggregated discovery lacks pottery.example.com/v1 kilns: %s", r.body)
	}
	var subs []string
	for _, s := range kilns.Subresources {
		subs = append(subs, s.Subresource)
	}
	if kilns.ResponseKind.Kind != "Kiln" || kilns.Scope != apidiscoveryv2.ScopeNamespace || !slices.Equal(kilns.ShortNames, []string{"kl"}) ||
		!slices.Equal(kilns.Categories, []string{"pottery"}) || !slices.Equal(subs, []string{"status", "scale"}) {
		t.Errorf("aggregated kilns = %+v (subresources %v)", kilns, subs)
	}

	// OpenAPI v3 publishes the schema, which kubectl explain reads.
	r = do(t, env, call{method: http.MethodGet, path: "/openapi/v3/apis/pottery.example.com/v1"})
	if r.code != http.StatusOK {
		t.Fatalf("openapi v3: %d %s", r.code, r.body)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Description string `json:"description"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if d := doc.Components.Schemas["com.example.pottery.v1.Kiln"].Properties["spec"].Description; d != "What the kiln is and how hot it gets." {
		t.Errorf("spec description = %q (schemas %d)", d, len(doc.Components.Schemas))
	}
	r = do(t, env, call{method: http.MethodGet, path: "/openapi/v2"})
	if r.code != http.StatusOK || !strings.Contains(string(r.body), `"com.example.pottery.v1.Kiln"`) {
		t.Errorf("openapi v2 lacks the Kiln definition: %d", r.code)
	}
}

func TestCRDObjects(t *testing.T) {
	env := controlplanetest.Start(t)
	establish(t, env, kilnCRD(t))
	ctx := ctxFor(t, time.Minute)
	dc := dynamic.NewForConfigOrDie(env.Config).Resource(kilnGVR).Namespace("default")

	in := kiln("k1", map[string]any{"fuel": "gas", "color": "red", "replicas": int64(1), "serial": "AB-1",
		"extra": map[string]any{"anything": "kept"}, "port": "http"})
	in.Object["status"] = map[string]any{"phase": "Hot"}
	created, err := dc.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	spec := created.Object["spec"].(map[string]any)
	if _, ok := spec["color"]; ok {
		t.Error("unknown field spec.color was not pruned")
	}
	if spec["maxTemperature"] != int64(1200) || spec["minTemperature"] != int64(0) {
		t.Errorf("defaults not applied: %v", spec)
	}
	if spec["extra"].(map[string]any)["anything"] != "kept" {
		t.Errorf("preserved field lost: %v", spec["extra"])
	}
	if _, ok := created.Object["status"]; ok {
		t.Error("create set status, which the status subresource owns")
	}
	if created.GetGeneration() != 1 || created.GetUID() == "" {
		t.Errorf("generation %d uid %q", created.GetGeneration(), created.GetUID())
	}

	got, err := dc.Get(ctx, "k1", metav1.GetOptions{})
	if err != nil || got.GetResourceVersion() != created.GetResourceVersion() {
		t.Fatalf("get: %v (rv %s, want %s)", err, got.GetResourceVersion(), created.GetResourceVersion())
	}
	if _, err := dc.Create(ctx, kiln("k2", map[string]any{"fuel": "wood"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := kiln("k3", map[string]any{"fuel": "wood"})
	other.SetLabels(map[string]string{"shop": "south"})
	if _, err := dc.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		opts metav1.ListOptions
		want []string
	}{
		{metav1.ListOptions{}, []string{"k1", "k2", "k3"}},
		{metav1.ListOptions{LabelSelector: "shop=north"}, []string{"k1", "k2"}},
		{metav1.ListOptions{FieldSelector: "metadata.name=k2"}, []string{"k2"}},
		{metav1.ListOptions{FieldSelector: "metadata.namespace=default,metadata.name!=k2"}, []string{"k1", "k3"}},
	} {
		l, err := dc.List(ctx, tt.opts)
		if err != nil {
			t.Fatalf("list %+v: %v", tt.opts, err)
		}
		var names []string
		for _, it := range l.Items {
			names = append(names, it.GetName())
		}
		if !slices.Equal(names, tt.want) || l.GetKind() != "KilnList" {
			t.Errorf("list %+v = %v (%s), want %v", tt.opts, names, l.GetKind(), tt.want)
		}
	}
	// spec.fuel is a selectable field of the version, spec.serial is not.
	if l, err := dc.List(ctx, metav1.ListOptions{FieldSelector: "spec.fuel=gas"}); err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "k1" {
		t.Errorf("field selector on spec.fuel: %v %v", l, err)
	}
	_, err = dc.List(ctx, metav1.ListOptions{FieldSelector: "spec.serial=AB-1"})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("field selector on spec.serial: %v, want 400", err)
	}

	// A watch from the create's resourceVersion sees what followed.
	w, err := dc.Watch(ctx, metav1.ListOptions{ResourceVersion: created.GetResourceVersion(), FieldSelector: "metadata.name=k1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	patched, err := dc.Patch(ctx, "k1", types.MergePatchType, []byte(`{"spec":{"maxTemperature":1300}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if patched.GetGeneration() != 2 {
		t.Errorf("generation after a spec change = %d, want 2", patched.GetGeneration())
	}
	if _, err := dc.Patch(ctx, "k1", types.JSONPatchType, []byte(`[{"op":"add","path":"/spec/tags","value":["raku"]}]`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("json patch: %v", err)
	}
	if _, err := dc.Patch(ctx, "k1", types.StrategicMergePatchType, []byte(`{"spec":{}}`), metav1.PatchOptions{}); !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge patch: %v, want 415", err)
	}
	st := patched.DeepCopy()
	st.Object["status"] = map[string]any{"phase": "Hot", "replicas": int64(1), "selector": "app=kiln"}
	st.SetResourceVersion("")
	withStatus, err := dc.UpdateStatus(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if withStatus.Object["status"].(map[string]any)["phase"] != "Hot" {
		t.Errorf("status = %v", withStatus.Object["status"])
	}
	// The main resource does not write status.
	main := withStatus.DeepCopy()
	main.Object["status"] = map[string]any{"phase": "Cold"}
	updated, err := dc.Update(ctx, main, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Object["status"].(map[string]any)["phase"] != "Hot" {
		t.Errorf("update of the main resource changed status: %v", updated.Object["status"])
	}

	// The scale subresource reads and writes spec.replicas.
	sc := do(t, env, call{method: http.MethodGet, path: "/apis/pottery.example.com/v1/namespaces/default/kilns/k1/scale"})
	var scale struct {
		Kind string `json:"kind"`
		Spec struct {
			Replicas int32 `json:"replicas"`
		} `json:"spec"`
		Status struct {
			Replicas int32  `json:"replicas"`
			Selector string `json:"selector"`
		} `json:"status"`
	}
	if err := json.Unmarshal(sc.body, &scale); err != nil || sc.code != 200 {
		t.Fatalf("scale: %d %s", sc.code, sc.body)
	}
	if scale.Kind != "Scale" || scale.Spec.Replicas != 1 || scale.Status.Replicas != 1 || scale.Status.Selector != "app=kiln" {
		t.Errorf("scale = %+v", scale)
	}
	sc = do(t, env, call{method: http.MethodPatch, path: "/apis/pottery.example.com/v1/namespaces/default/kilns/k1/scale",
		contentType: "application/merge-patch+json", body: []byte(`{"spec":{"replicas":3}}`)})
	if sc.code != 200 {
		t.Fatalf("scale patch: %d %s", sc.code, sc.body)
	}
	got, err = dc.Get(ctx, "k1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); n != 3 {
		t.Errorf("spec.replicas after scale = %d, want 3", n)
	}

	var seen []string
	for len(seen) < 4 { // merge patch, json patch, status, scale
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", ev.Object)
			}
			seen = append(seen, string(ev.Type))
		case <-ctx.Done():
			t.Fatalf("watch saw %v", seen)
		}
	}
	if want := []string{"MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED"}; !slices.Equal(seen, want) {
		t.Errorf("watch = %v, want %v", seen, want)
	}

	// The deprecated version serves the same objects, with a warning.
	r := do(t, env, call{method: http.MethodGet, path: "/apis/pottery.example.com/v1beta1/namespaces/default/kilns/k1"})
	if r.code != 200 || !strings.Contains(r.header.Get("Warning"), "pottery.example.com/v1beta1 Kiln is deprecated; use pottery.example.com/v1 Kiln") {
		t.Errorf("v1beta1 get: %d, Warning %q", r.code, r.header.Get("Warning"))
	}
	var beta unstructured.Unstructured
	if err := json.Unmarshal(r.body, &beta.Object); err != nil || beta.GetAPIVersion() != "pottery.example.com/v1beta1" {
		t.Errorf("v1beta1 object apiVersion %q: %v", beta.GetAPIVersion(), err)
	}

	// Tables carry the printer columns.
	r = do(t, env, call{method: http.MethodGet, path: "/apis/pottery.example.com/v1/namespaces/default/kilns",
		header: http.Header{"Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io"}}})
	var table metav1.Table
	if err := json.Unmarshal(r.body, &table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if want := []string{"Name", "Fuel", "Max-Temp", "Replicas", "Age"}; !slices.Equal(cols, want) {
		t.Errorf("columns = %v, want %v", cols, want)
	}
	if len(table.Rows) != 3 || table.Rows[0].Cells[0] != "k1" || table.Rows[0].Cells[1] != "gas" || table.Rows[0].Cells[2] != float64(1300) {
		t.Errorf("rows = %+v", table.Rows)
	}

	if err := dc.Delete(ctx, "k2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dc.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "shop=south"}); err != nil {
		t.Fatal(err)
	}
	l, err := dc.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "k1" {
		t.Errorf("after deletes: %v %v", l, err)
	}
}

// TestCRDValidation checks kube's schema validation: each bad object is a
// 422 with the field and message kube gives, and writes nothing.
func TestCRDValidation(t *testing.T) {
	env := controlplanetest.Start(t)
	establish(t, env, kilnCRD(t))
	ctx := ctxFor(t, time.Minute)
	dc := dynamic.NewForConfigOrDie(env.Config).Resource(kilnGVR).Namespace("default")
	tests := []struct {
		name  string
		spec  map[string]any
		field string
		msg   string
	}{
		{"enum", map[string]any{"fuel": "coal"}, "spec.fuel", `Unsupported value: "coal": supported values: "gas", "wood", "electric"`},
		{"required", map[string]any{"maxTemperature": int64(500)}, "spec.fuel", "Required value"},
		{"maximum", map[string]any{"fuel": "gas", "maxTemperature": int64(2000)}, "spec.maxTemperature", "should be less than or equal to 1400"},
		{"minimum", map[string]any{"fuel": "gas", "replicas": int64(-1)}, "spec.replicas", "should be greater than or equal to 0"},
		{"pattern", map[string]any{"fuel": "gas", "serial": "x1"}, "spec.serial", `should match '^[A-Z]{2}-[0-9]+$'`},
		{"type", map[string]any{"fuel": "gas", "maxTemperature": "hot"}, "spec.maxTemperature", `must be of type integer: "string"`},
		{"not nullable", map[string]any{"fuel": 7}, "spec.fuel", `must be of type string: "integer"`},
		{"list set", map[string]any{"fuel": "gas", "tags": []any{"a", "a"}}, "spec.tags[1]", `Duplicate value: "a"`},
		{"int-or-string", map[string]any{"fuel": "gas", "port": true}, "spec.port", "must be of type integer,string"},
		{"embedded resource", map[string]any{"fuel": "gas", "template": map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": "x"}}},
			"spec.template.kind", "Required value"},
		{"list map", map[string]any{"fuel": "gas", "burners": []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}}},
			"spec.burners[1]", `Duplicate value: {"name":"a"}`},
		{"cel", map[string]any{"fuel": "gas", "minTemperature": int64(1300), "maxTemperature": int64(1000)}, "spec", "minTemperature must not exceed maxTemperature"},
		{"format", map[string]any{"fuel": "gas", "address": "10.0.0.300"}, "spec.address", `spec.address in body must be of type ipv4: "10.0.0.300"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dc.Create(ctx, kiln("bad", tt.spec), metav1.CreateOptions{})
			assertCause(t, err, tt.field, tt.msg)
		})
	}
	// The same features with values they allow: kept, the embedded
	// resource's metadata coerced as kube coerces object meta.
	valid, err := dc.Create(ctx, kiln("valid", map[string]any{"fuel": "gas", "address": "10.0.0.3", "port": int64(8080),
		"tags": []any{"a", "b"}, "burners": []any{map[string]any{"name": "a", "power": int64(3)}, map[string]any{"name": "b"}},
		"template": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "bogus": "pruned"},
			"data": map[string]any{"k": "v"}}}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("valid: %v", err)
	}
	vs := valid.Object["spec"].(map[string]any)
	if vs["address"] != "10.0.0.3" || vs["port"] != int64(8080) || len(vs["tags"].([]any)) != 2 || len(vs["burners"].([]any)) != 2 {
		t.Errorf("valid spec = %v", vs)
	}
	if md, _, _ := unstructured.NestedMap(vs, "template", "metadata"); md["name"] != "x" || md["bogus"] != nil {
		t.Errorf("embedded metadata = %v, want name kept and the unknown field pruned", md)
	}
	if d, _, _ := unstructured.NestedString(vs, "template", "data", "k"); d != "v" {
		t.Errorf("embedded object lost its preserved fields: %v", vs["template"])
	}
	if _, err := dc.Patch(ctx, "valid", types.MergePatchType, []byte(`{"spec":{"port":"https"}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("int-or-string takes a string too: %v", err)
	}
	if err := dc.Delete(ctx, "valid", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// nullable: null is kept where allowed, and pruned elsewhere.
	ok, err := dc.Create(ctx, kiln("nulls", map[string]any{"fuel": "gas", "notes": nil, "replicas": nil}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("nulls: %v", err)
	}
	spec := ok.Object["spec"].(map[string]any)
	if v, has := spec["notes"]; !has || v != nil {
		t.Errorf("nullable notes = %v (present %v), want null", v, has)
	}
	if _, has := spec["replicas"]; has {
		t.Errorf("null replicas kept: %v", spec)
	}
	l, err := dc.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Errorf("bad objects were written: %v %v", l, err)
	}

	// oldSelf: a transition rule checks updates only.
	k, err := dc.Create(ctx, kiln("serial", map[string]any{"fuel": "gas", "serial": "AB-1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(k.Object, "AB-2", "spec", "serial")
	_, err = dc.Update(ctx, k, metav1.UpdateOptions{})
	assertCause(t, err, "spec.serial", "serial is immutable")
}

func assertCause(t *testing.T, err error, field, msg string) {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusUnprocessableEntity {
		t.Fatalf("err = %v, want 422", err)
	}
	for _, c := range se.ErrStatus.Details.Causes {
		if c.Field == field && strings.Contains(c.Message, msg) {
			return
		}
	}
	t.Errorf("causes %+v lack %s: %q", se.ErrStatus.Details.Causes, field, msg)
}

// TestCRDInvalidDefinitions: a definition kube refuses is a 422 with
// causes, and nothing is written.
func TestCRDInvalidDefinitions(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, time.Minute)
	cs := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	tests := []struct {
		name   string
		mutate func(*apiextensionsv1.CustomResourceDefinition)
		field  string
		msg    string
	}{
		{"name not plural.group", func(c *apiextensionsv1.CustomResourceDefinition) { c.Name = "ovens.pottery.example.com" },
			"metadata.name", `must be spec.names.plural+"."+spec.group`},
		{"two storage versions", func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[1].Storage = true },
			"spec.versions", "must have exactly one version marked as storage version"},
		{"non-structural", func(c *apiextensionsv1.CustomResourceDefinition) {
			p := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			f := p.Properties["fuel"]
			f.Type = ""
			p.Properties["fuel"] = f
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = p
		}, "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[fuel].type", "Required value: must not be empty for specified object fields"},
		{"bad CEL", func(c *apiextensionsv1.CustomResourceDefinition) {
			p := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			p.XValidations[0].Rule = "self.nosuchfield > 1"
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = p
		}, "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule", "compilation failed: ERROR: <input>:1:5: undefined field 'nosuchfield'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := kilnCRD(t)
			tt.mutate(crd)
			_, err := cs.Create(ctx, crd, metav1.CreateOptions{})
			assertCause(t, err, tt.field, tt.msg)
			if _, err := cs.Get(ctx, crd.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("invalid CRD was written: %v", err)
			}
		})
	}
}

// TestCRDNameConflict: a second definition asking for a kind the group
// has already is not accepted, and not served, as in kube.
func TestCRDNameConflict(t *testing.T) {
	env := controlplanetest.Start(t)
	establish(t, env, kilnCRD(t))
	ctx := ctxFor(t, time.Minute)
	cs := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	oven := kilnCRD(t)
	oven.Name, oven.Spec.Names.Plural, oven.Spec.Names.Singular = "ovens.pottery.example.com", "ovens", "oven"
	oven.Spec.Names.ShortNames = nil
	if _, err := cs.Create(ctx, oven, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := cs.Get(ctx, oven.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := apihelpers.FindCRDCondition(got, apiextensionsv1.NamesAccepted); c != nil {
			// kube checks kind, then list kind: the last conflict is the one reported.
			if c.Status != apiextensionsv1.ConditionFalse || c.Reason != "ListKindConflict" || c.Message != `"KilnList" is already in use` {
				t.Errorf("NamesAccepted = %+v", c)
			}
			if apihelpers.IsCRDConditionTrue(got, apiextensionsv1.Established) {
				t.Error("a conflicting definition was established")
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("NamesAccepted never set")
		case <-time.After(20 * time.Millisecond):
		}
	}
	r := do(t, env, call{method: http.MethodGet, path: "/apis/pottery.example.com/v1/ovens"})
	if r.code != http.StatusNotFound {
		t.Errorf("ovens served: %d", r.code)
	}
}

// TestCRDDelete: deleting a definition deletes its objects first (the
// cleanup finalizer), then the definition; its kinds are no longer served.
func TestCRDDelete(t *testing.T) {
	env := controlplanetest.Start(t)
	establish(t, env, kilnCRD(t))
	ctx := ctxFor(t, time.Minute)
	dc := dynamic.NewForConfigOrDie(env.Config).Resource(kilnGVR)
	for _, ns := range []string{"default", "kube-system"} {
		if _, err := dc.Namespace(ns).Create(ctx, kiln("k-"+ns, map[string]any{"fuel": "gas"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cs := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	if err := cs.Delete(ctx, "kilns.pottery.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := cs.Get(ctx, "kilns.pottery.example.com", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD not deleted: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	keys, err := env.Store.List(ctx, "/registry/pottery.example.com/", storage.ListOptions{})
	if err != nil || len(keys.Items) != 0 {
		t.Errorf("objects left in etcd: %d %v", len(keys.Items), err)
	}
	// Each apiserver stops serving the kind once the deletion reaches it
	// on the log.
	for {
		r := do(t, env, call{method: http.MethodGet, path: "/apis/pottery.example.com/v1/kilns"})
		if r.code == http.StatusNotFound {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kilns still served: %d", r.code)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestCRDControllerRuntime drives custom objects with controller-runtime's
// client, as operators do.
func TestCRDControllerRuntime(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	env := controlplanetest.Start(t)
	establish(t, env, kilnCRD(t))
	ctx := ctxFor(t, time.Minute)
	c, err := crclient.NewWithWatch(env.Config, crclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "pottery.example.com", Version: "v1", Kind: "Kiln"}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind("KilnList"))
	w, err := c.Watch(ctx, list, crclient.InNamespace("default"))
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	obj := kiln("cr1", map[string]any{"fuel": "electric"})
	obj.SetNamespace("default")
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("create: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, crclient.ObjectKey{Namespace: "default", Name: "cr1"}, got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "maxTemperature"); n != 1200 {
		t.Errorf("maxTemperature = %d, want the default 1200", n)
	}
	_ = unstructured.SetNestedField(got.Object, "Warm", "status", "phase")
	if err := c.Status().Update(ctx, got); err != nil {
		t.Fatalf("status update: %v", err)
	}
	if err := c.List(ctx, list, crclient.InNamespace("default"), crclient.MatchingLabels{"shop": "north"}); err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %d %v", len(list.Items), err)
	}
	var types []watch.EventType
	for len(types) < 2 {
		select {
		case ev := <-w.ResultChan():
			types = append(types, ev.Type)
		case <-ctx.Done():
			t.Fatalf("watch saw %v", types)
		}
	}
	if !slices.Equal(types, []watch.EventType{watch.Added, watch.Modified}) {
		t.Errorf("watch = %v", types)
	}
	if err := c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
}

// TestCRDTwoAPIServers: a kind defined through one apiserver is served by
// another on the same etcd and log at once (it follows the definitions on
// the log, and waits for them before answering 404), and stops being
// served there when the definition goes.
func TestCRDTwoAPIServers(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 2*time.Minute)
	other, err := controlplane.Start(ctx, controlplane.Config{EtcdEndpoints: env.EtcdEndpoints(), NATSURL: env.NATSURL(),
		Listen: "127.0.0.1:0", NoFsync: true, Authenticator: apiserver.TokenAuthenticator{
			controlplanetest.AdminToken: {User: "admin", Groups: []string{apiserver.GroupMasters}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "http://" + other.Addr
	establish(t, env, kilnCRD(t))
	dc := dynamic.NewForConfigOrDie(cfg).Resource(kilnGVR).Namespace("default")
	if _, err := dc.Create(ctx, kiln("via-other", map[string]any{"fuel": "wood"}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through the other apiserver: %v", err)
	}
	got, err := dynamic.NewForConfigOrDie(env.Config).Resource(kilnGVR).Namespace("default").Get(ctx, "via-other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "maxTemperature"); n != 1200 {
		t.Errorf("the other apiserver did not default: %v", got.Object["spec"])
	}
	rl, err := kubernetes.NewForConfigOrDie(cfg).Discovery().ServerResourcesForGroupVersion("pottery.example.com/v1")
	if err != nil || len(rl.APIResources) != 3 {
		t.Errorf("discovery on the other apiserver: %v %v", rl, err)
	}
	cs := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	if err := cs.Delete(ctx, "kilns.pottery.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := dc.List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kilns still served by the other apiserver: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestCRDDefaultOnRead: a default added to the schema shows on objects
// stored before, as kube defaults what it reads from etcd.
func TestCRDDefaultOnRead(t *testing.T) {
	env := controlplanetest.Start(t)
	establish(t, env, kilnCRD(t))
	ctx := ctxFor(t, time.Minute)
	dc := dynamic.NewForConfigOrDie(env.Config).Resource(kilnGVR).Namespace("default")
	if _, err := dc.Create(ctx, kiln("old", map[string]any{"fuel": "gas"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	crd, err := cs.Get(ctx, "kilns.pottery.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties["glaze"] = apiextensionsv1.JSONSchemaProps{Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"clear"`)}}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	if _, err := cs.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := dc.Get(ctx, "old", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if g, _, _ := unstructured.NestedString(got.Object, "spec", "glaze"); g == "clear" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the new default never showed: %v", got.Object["spec"])
		case <-time.After(20 * time.Millisecond):
		}
	}
}
