package webhook

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/events"
)

// TestDryRunSideEffects is kube's rule: a dry run is refused (400) by a
// webhook whose sideEffects are Unknown or Some (only possible for
// configurations stored before v1 required None or NoneOnDryRun).
func TestDryRunSideEffects(t *testing.T) {
	attr := func(dry bool) admission.Attributes {
		return admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "ns", "p",
			schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "", admission.Create, nil, dry, &user.DefaultInfo{Name: "u"})
	}
	tests := []struct {
		se      admissionregistrationv1.SideEffectClass
		dry     bool
		wantErr string
	}{
		{admissionregistrationv1.SideEffectClassNone, true, ""},
		{admissionregistrationv1.SideEffectClassNoneOnDryRun, true, ""},
		{admissionregistrationv1.SideEffectClassSome, true, `admission webhook "h.example.com" does not support dry run`},
		{admissionregistrationv1.SideEffectClassUnknown, true, `admission webhook "h.example.com" does not support dry run`},
		{admissionregistrationv1.SideEffectClassSome, false, ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.se), func(t *testing.T) {
			err := checkDryRun(attr(tt.dry), "h.example.com", ptr.To(tt.se))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want 400 %q", err, tt.wantErr)
			}
		})
	}
}

func TestRandomEndpoint(t *testing.T) {
	slice := func(port string, ready *bool, node string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Name: ptr.To(port), Port: ptr.To[int32](8443)}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ready}}}}
	}
	tests := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		ok     bool
	}{
		{"ready", []*discoveryv1.EndpointSlice{slice("https", ptr.To(true), "n1")}, true},
		{"ready unset counts as ready", []*discoveryv1.EndpointSlice{slice("https", nil, "n1")}, true},
		{"not ready", []*discoveryv1.EndpointSlice{slice("https", ptr.To(false), "n1")}, false},
		{"other port", []*discoveryv1.EndpointSlice{slice("metrics", ptr.To(true), "n1")}, false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip, port, node, ok := randomEndpoint(tt.slices, "https")
			if ok != tt.ok || ok && (ip != "10.0.0.1" || port != 8443 || node != "n1") {
				t.Fatalf("%s %d %s %v", ip, port, node, ok)
			}
		})
	}
}

// TestHookOrder: configurations by name, webhooks in order within one;
// a removed configuration's webhooks are gone.
func TestHookOrder(t *testing.T) {
	c := newConfigurations()
	put := func(typ events.Type, name string, hooks ...string) {
		obj := `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfiguration","metadata":{"name":"` + name +
			`","resourceVersion":"1"},"webhooks":[`
		for i, h := range hooks {
			if i > 0 {
				obj += ","
			}
			obj += `{"name":"` + h + `","clientConfig":{"url":"https://127.0.0.1/"},"sideEffects":"None","admissionReviewVersions":["v1"]}`
		}
		if err := c.apply("mutatingwebhookconfigurations", typ, []byte(obj+"]}")); err != nil {
			t.Fatal(err)
		}
	}
	put(events.Added, "b", "b1.x.y", "b2.x.y")
	put(events.Added, "a", "a1.x.y", "a1.x.y")
	var names []string
	for _, h := range c.hooks().mutating {
		names = append(names, h.GetName()+"@"+h.GetUID())
	}
	if got := strings.Join(names, " "); got != "a1.x.y@a/a1.x.y/0 a1.x.y@a/a1.x.y/1 b1.x.y@b/b1.x.y/0 b2.x.y@b/b2.x.y/0" {
		t.Errorf("order %s", got)
	}
	put(events.Deleted, "a")
	if n := len(c.hooks().mutating); n != 2 {
		t.Errorf("%d webhooks after the delete", n)
	}
}
