package discovery_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/schemas/discovery"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

func testResources() []*schemas.Resource {
	return []*schemas.Resource{
		{
			GroupVersion: appsv1.SchemeGroupVersion,
			Kind:         "Deployment", Plural: "deployments", Singular: "deployment",
			ShortNames: []string{"deploy"}, Categories: []string{"all"},
			Namespaced: true, Subresources: []string{"status", "scale"},
			New:     func() schemas.Object { return &appsv1.Deployment{} },
			NewList: func() runtime.Object { return &appsv1.DeploymentList{} },
		},
		{
			GroupVersion: corev1.SchemeGroupVersion,
			Kind:         "Pod", Plural: "pods", Singular: "pod",
			ShortNames: []string{"po"}, Categories: []string{"all"},
			Namespaced: true, Subresources: []string{"status", "binding"},
			New:     func() schemas.Object { return &corev1.Pod{} },
			NewList: func() runtime.Object { return &corev1.PodList{} },
		},
		{
			GroupVersion: corev1.SchemeGroupVersion,
			Kind:         "Node", Plural: "nodes", Singular: "node",
			ShortNames: []string{"no"}, Subresources: []string{"status"},
			New:     func() schemas.Object { return &corev1.Node{} },
			NewList: func() runtime.Object { return &corev1.NodeList{} },
		},
		{
			GroupVersion: coordinationv1.SchemeGroupVersion,
			Kind:         "Lease", Plural: "leases", Singular: "lease", Namespaced: true,
			New:     func() schemas.Object { return &coordinationv1.Lease{} },
			NewList: func() runtime.Object { return &coordinationv1.LeaseList{} },
		},
	}
}

var allVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// wantResources is what discovery must report, by group version.
var wantResources = map[string][]metav1.APIResource{
	"v1": {
		{Name: "nodes", SingularName: "node", Kind: "Node", Verbs: allVerbs, ShortNames: []string{"no"}},
		{Name: "nodes/status", Kind: "Node", Verbs: metav1.Verbs{"get", "patch", "update"}},
		{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: allVerbs, ShortNames: []string{"po"}, Categories: []string{"all"}},
		{Name: "pods/binding", Namespaced: true, Kind: "Binding", Verbs: metav1.Verbs{"create"}},
		{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get", "patch", "update"}},
	},
	"apps/v1": {
		{Name: "deployments", SingularName: "deployment", Namespaced: true, Kind: "Deployment", Verbs: allVerbs, ShortNames: []string{"deploy"}, Categories: []string{"all"}},
		{Name: "deployments/scale", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: metav1.Verbs{"get", "patch", "update"}},
		{Name: "deployments/status", Namespaced: true, Kind: "Deployment", Verbs: metav1.Verbs{"get", "patch", "update"}},
	},
	"coordination.k8s.io/v1": {
		{Name: "leases", SingularName: "lease", Namespaced: true, Kind: "Lease", Verbs: allVerbs},
	},
}

// normalize sorts resources by name and clears what the two discovery
// formats legitimately disagree on: client-go fills group and version in
// from aggregated discovery's response kinds.
func normalize(gv string, rs []metav1.APIResource) []metav1.APIResource {
	out := slices.Clone(rs)
	for i := range out {
		if (schema.GroupVersion{Group: out[i].Group, Version: out[i].Version}).String() == gv ||
			(out[i].Group == "" && out[i].Version == "") {
			out[i].Group, out[i].Version = "", ""
		}
		// ... and copies the parent's singular name into subresources.
		if strings.Contains(out[i].Name, "/") {
			out[i].SingularName = ""
		}
		if len(out[i].ShortNames) == 0 {
			out[i].ShortNames = nil
		}
		if len(out[i].Categories) == 0 {
			out[i].Categories = nil
		}
	}
	slices.SortFunc(out, func(a, b metav1.APIResource) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// TestClientGo reads discovery through client-go, as kubectl does, in
// both the aggregated and the legacy format.
func TestClientGo(t *testing.T) {
	srv := httptest.NewServer(discovery.Handler(testResources()))
	t.Cleanup(srv.Close)

	for _, legacy := range []bool{false, true} {
		name := "aggregated"
		if legacy {
			name = "legacy"
		}
		t.Run(name, func(t *testing.T) {
			dc := clientdiscovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL})
			dc.UseLegacyDiscovery = legacy
			groups, lists, err := dc.ServerGroupsAndResources()
			if err != nil {
				t.Fatal(err)
			}
			var gnames []string
			for _, g := range groups {
				gnames = append(gnames, g.Name+"="+g.PreferredVersion.GroupVersion)
			}
			if want := []string{"=v1", "apps=apps/v1", "coordination.k8s.io=coordination.k8s.io/v1"}; !slices.Equal(gnames, want) {
				t.Errorf("groups = %v, want %v", gnames, want)
			}
			if len(lists) != len(wantResources) {
				t.Errorf("%d resource lists, want %d", len(lists), len(wantResources))
			}
			for _, l := range lists {
				want, ok := wantResources[l.GroupVersion]
				if !ok {
					t.Errorf("unexpected group version %s", l.GroupVersion)
					continue
				}
				got := normalize(l.GroupVersion, l.APIResources)
				if w := normalize(l.GroupVersion, want); !equalResources(got, w) {
					t.Errorf("%s:\ngot  %+v\nwant %+v", l.GroupVersion, got, w)
				}
			}
		})
	}
}

func equalResources(a, b []metav1.APIResource) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestHTTP(t *testing.T) {
	srv := httptest.NewServer(discovery.Handler(testResources()))
	t.Cleanup(srv.Close)
	const (
		v2      = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
	)
	tests := []struct {
		name, path, accept string
		wantCode           int
		wantType           string
		wantKind           string
		wantAPIVersion     string
	}{
		{"api legacy", "/api", "application/json", 200, "application/json", "APIVersions", ""},
		{"api no accept", "/api", "", 200, "application/json", "APIVersions", ""},
		{"api aggregated", "/api", v2 + ",application/json", 200, discovery.ContentTypeV2, "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"},
		{"apis aggregated kubectl 1.32", "/apis", v2 + "," + v2beta1 + ",application/json", 200, discovery.ContentTypeV2, "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"},
		{"apis v2beta1 only", "/apis", v2beta1 + ",application/json", 200, discovery.ContentTypeV2Beta1, "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2beta1"},
		{"apis nopeer profile", "/apis", v2 + ";profile=nopeer," + v2, 200, discovery.ContentTypeV2, "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"},
		{"apis json before aggregated", "/apis", "application/json," + v2, 200, "application/json", "APIGroupList", "v1"},
		{"apis protobuf client", "/apis", "application/vnd.kubernetes.protobuf, */*", 200, "application/json", "APIGroupList", "v1"},
		{"group", "/apis/apps", "", 200, "application/json", "APIGroup", "v1"},
		{"core resources", "/api/v1", "", 200, "application/json", "APIResourceList", "v1"},
		{"group resources", "/apis/coordination.k8s.io/v1/", "", 200, "application/json", "APIResourceList", "v1"},
		{"unknown version", "/apis/apps/v2", "", 404, "application/json", "Status", "v1"},
		{"unknown group", "/apis/batch", "", 404, "application/json", "Status", "v1"},
		{"resource path", "/api/v1/namespaces/default/pods/x", "", 404, "application/json", "Status", "v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+tt.path, nil)
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("code = %d, want %d", resp.StatusCode, tt.wantCode)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", got, tt.wantType)
			}
			var tm metav1.TypeMeta
			if err := json.NewDecoder(resp.Body).Decode(&tm); err != nil {
				t.Fatal(err)
			}
			if tm.Kind != tt.wantKind || tm.APIVersion != tt.wantAPIVersion {
				t.Errorf("got %s %s, want %s %s", tm.APIVersion, tm.Kind, tt.wantAPIVersion, tt.wantKind)
			}
			if tt.wantCode == 200 {
				etag := resp.Header.Get("Etag")
				req.Header.Set("If-None-Match", etag)
				again, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				again.Body.Close()
				if again.StatusCode != http.StatusNotModified {
					t.Errorf("with If-None-Match %s: code %d, want 304", etag, again.StatusCode)
				}
			}
		})
	}
}

func TestAggregatedDocument(t *testing.T) {
	srv := httptest.NewServer(discovery.Handler(testResources()))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/apis", nil)
	req.Header.Set("Accept", discovery.ContentTypeV2)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || list.Items[0].Name != "apps" || list.Items[1].Name != "coordination.k8s.io" {
		t.Fatalf("groups = %+v", list.Items)
	}
	v := list.Items[0].Versions[0]
	if v.Version != "v1" || v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
		t.Errorf("version = %s %s", v.Version, v.Freshness)
	}
	d := v.Resources[0]
	if d.Resource != "deployments" || d.Scope != apidiscoveryv2.ScopeNamespace || d.SingularResource != "deployment" ||
		d.ResponseKind.Kind != "Deployment" || d.ResponseKind.Group != "apps" {
		t.Errorf("deployments = %+v", d)
	}
	var subs []string
	for _, s := range d.Subresources {
		subs = append(subs, s.Subresource+"="+schema.GroupVersionKind{Group: s.ResponseKind.Group, Version: s.ResponseKind.Version, Kind: s.ResponseKind.Kind}.String())
	}
	want := []string{"status=apps/v1, Kind=Deployment", "scale=autoscaling/v1, Kind=Scale"}
	if !slices.Equal(subs, want) {
		t.Errorf("subresources = %v, want %v", subs, want)
	}
}

func TestVersionOrder(t *testing.T) {
	rs := testResources()
	beta := *rs[3]
	beta.GroupVersion = schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1beta1"}
	alpha := *rs[3]
	alpha.GroupVersion = schema.GroupVersion{Group: "coordination.k8s.io", Version: "v2alpha1"}
	srv := httptest.NewServer(discovery.Handler(append(rs, &alpha, &beta)))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/apis/coordination.k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var g metav1.APIGroup
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range g.Versions {
		got = append(got, v.Version)
	}
	if want := []string{"v1", "v1beta1", "v2alpha1"}; !slices.Equal(got, want) || g.PreferredVersion.Version != "v1" {
		t.Errorf("versions = %v preferred %s, want %v preferred v1", got, g.PreferredVersion.Version, want)
	}
}
