package openapi_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/schemas/openapi"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	protomodels "k8s.io/kube-openapi/pkg/util/proto"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	h, err := openapi.Handler(testResources())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	// No redirects and no transparent gzip: the test looks at both.
	c := &http.Client{
		Transport:     &http.Transport{DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestClientGo reads the documents the way kubectl does, through client-go.
func TestClientGo(t *testing.T) {
	srv := newServer(t)
	dc := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL})

	t.Run("v2 protobuf", func(t *testing.T) {
		doc, err := dc.OpenAPISchema()
		if err != nil {
			t.Fatal(err)
		}
		models, err := protomodels.NewOpenAPIData(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"io.k8s.api.core.v1.Pod", "io.k8s.api.apps.v1.Deployment", "io.k8s.api.autoscaling.v1.Scale"} {
			if models.LookupModel(name) == nil {
				t.Errorf("model %s missing", name)
			}
		}
		kind, ok := models.LookupModel("io.k8s.api.core.v1.Container").(*protomodels.Kind)
		if !ok {
			t.Fatal("Container is no kind")
		}
		if !kind.IsRequired("name") || kind.IsRequired("image") {
			t.Errorf("Container required = %v, want name only", kind.RequiredFields)
		}
	})

	t.Run("v3", func(t *testing.T) {
		paths, err := dc.OpenAPIV3().Paths()
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range paths {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if want := []string{"api/v1", "apis/apps/v1"}; !slices.Equal(keys, want) {
			t.Fatalf("paths = %v, want %v", keys, want)
		}
		root := openapi3.NewRoot(dc.OpenAPIV3())
		doc, err := root.GVSpec(appsv1.SchemeGroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"io.k8s.api.apps.v1.Deployment", "io.k8s.api.apps.v1.DeploymentList", "io.k8s.api.autoscaling.v1.Scale"} {
			if doc.Components.Schemas[name] == nil {
				t.Errorf("schema %s missing", name)
			}
		}
		scale := doc.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
		if scale == nil || scale.Patch == nil {
			t.Fatal("scale path or its patch missing")
		}
		var gvk map[string]string
		if err := scale.Patch.Extensions.GetObject("x-kubernetes-group-version-kind", &gvk); err != nil {
			t.Fatal(err)
		}
		if gvk["group"] != "autoscaling" || gvk["kind"] != "Scale" || gvk["version"] != "v1" {
			t.Errorf("scale gvk = %v", gvk)
		}
		// kubectl leaves validation to the server when PATCH takes
		// fieldValidation.
		item := doc.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
		found := false
		for _, p := range item.Patch.Parameters {
			found = found || (p.Name == "fieldValidation" && p.In == "query")
		}
		if !found {
			t.Error("patch has no fieldValidation parameter")
		}
	})
}

func TestSchemaLookup(t *testing.T) {
	s, err := openapi.Build(testResources())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		gvk      schema.GroupVersionKind
		wantName string
		wantProp string
	}{
		{corev1.SchemeGroupVersion.WithKind("Pod"), "io.k8s.api.core.v1.Pod", "spec"},
		{corev1.SchemeGroupVersion.WithKind("PodList"), "io.k8s.api.core.v1.PodList", "items"},
		{appsv1.SchemeGroupVersion.WithKind("Deployment"), "io.k8s.api.apps.v1.Deployment", "status"},
		{schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, "io.k8s.api.autoscaling.v1.Scale", "spec"},
		{schema.GroupVersionKind{Version: "v1", Kind: "Binding"}, "io.k8s.api.core.v1.Binding", "target"},
		{schema.GroupVersionKind{Version: "v1", Kind: "Status"}, "io.k8s.apimachinery.pkg.apis.meta.v1.Status", "reason"},
	}
	for _, tt := range tests {
		t.Run(tt.gvk.String(), func(t *testing.T) {
			name, ok := s.DefinitionName(tt.gvk)
			if !ok || name != tt.wantName {
				t.Fatalf("DefinitionName = %q, %v; want %q", name, ok, tt.wantName)
			}
			sch, ok := s.Schema(tt.gvk)
			if !ok {
				t.Fatal("no schema")
			}
			if _, ok := sch["properties"].(map[string]any)[tt.wantProp]; !ok {
				t.Errorf("property %s missing", tt.wantProp)
			}
			b, _ := json.Marshal(sch["x-kubernetes-group-version-kind"])
			want, _ := json.Marshal(map[string]string{"group": tt.gvk.Group, "kind": tt.gvk.Kind, "version": tt.gvk.Version})
			if !strings.Contains(string(b), string(want)) {
				t.Errorf("gvk list %s lacks %s", b, want)
			}
		})
	}
	if _, ok := s.Schema(schema.GroupVersionKind{Version: "v1", Kind: "Nope"}); ok {
		t.Error("unknown kind found")
	}
}

func TestHandler(t *testing.T) {
	srv := newServer(t)
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.NewDecoder(get(t, srv.URL+"/openapi/v3", nil).Body).Decode(&index); err != nil {
		t.Fatal(err)
	}
	coreURL := index.Paths["api/v1"].ServerRelativeURL
	if !strings.HasPrefix(coreURL, "/openapi/v3/api/v1?hash=") {
		t.Fatalf("api/v1 url = %q", coreURL)
	}
	v2 := get(t, srv.URL+"/openapi/v2", nil)
	v2ETag := v2.Header.Get("Etag")

	tests := []struct {
		name       string
		path       string
		header     map[string]string
		wantCode   int
		wantType   string
		wantHeader map[string]string
	}{
		{name: "v2 json", path: "/openapi/v2", wantCode: 200, wantType: "application/json"},
		{name: "v2 protobuf", path: "/openapi/v2",
			header:   map[string]string{"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
			wantCode: 200, wantType: openapi.MediaTypeV2Proto},
		{name: "v2 not modified", path: "/openapi/v2",
			header: map[string]string{"If-None-Match": v2ETag}, wantCode: 304},
		{name: "v2 not acceptable", path: "/openapi/v2",
			header: map[string]string{"Accept": "text/html"}, wantCode: 406},
		{name: "v3 doc", path: coreURL, wantCode: 200, wantType: "application/json",
			wantHeader: map[string]string{"Cache-Control": "public, immutable, max-age=31536000"}},
		{name: "v3 protobuf", path: coreURL,
			header:   map[string]string{"Accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"},
			wantCode: 200, wantType: openapi.MediaTypeV3Proto},
		{name: "v3 gzip", path: coreURL, header: map[string]string{"Accept-Encoding": "gzip"},
			wantCode: 200, wantType: "application/json", wantHeader: map[string]string{"Content-Encoding": "gzip"}},
		{name: "v3 stale hash", path: "/openapi/v3/api/v1?hash=0", wantCode: 301,
			wantHeader: map[string]string{"Location": coreURL}},
		{name: "v3 unknown group", path: "/openapi/v3/apis/batch/v1", wantCode: 404},
		{name: "elsewhere", path: "/openapi/v4", wantCode: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := get(t, srv.URL+tt.path, tt.header)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("code = %d, want %d", resp.StatusCode, tt.wantCode)
			}
			if tt.wantType != "" && resp.Header.Get("Content-Type") != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", resp.Header.Get("Content-Type"), tt.wantType)
			}
			for k, v := range tt.wantHeader {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}

	t.Run("v3 protobuf and gzip decode", func(t *testing.T) {
		resp := get(t, srv.URL+coreURL, map[string]string{
			"Accept": openapi.MediaTypeV3Proto, "Accept-Encoding": "gzip",
		})
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		var doc openapiv3.Document
		if err := proto.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Openapi != "3.0.0" || doc.Components == nil {
			t.Errorf("document = openapi %q, components %v", doc.Openapi, doc.Components != nil)
		}
	})
}
