package schemas

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func validMutatingConfiguration() *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "inject"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "inject.example.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/mutate")},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

func TestWebhookConfigurationDefaults(t *testing.T) {
	c := validMutatingConfiguration()
	c.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc"}}
	defaultMutatingWebhookConfiguration(c)
	h := c.Webhooks[0]
	if *h.FailurePolicy != admissionregistrationv1.Fail || *h.MatchPolicy != admissionregistrationv1.Equivalent || *h.TimeoutSeconds != 10 ||
		*h.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy || h.NamespaceSelector == nil || h.ObjectSelector == nil ||
		*h.Rules[0].Scope != admissionregistrationv1.AllScopes || *h.ClientConfig.Service.Port != 443 {
		t.Errorf("defaults: %+v", h)
	}
}

func TestValidateWebhookConfiguration(t *testing.T) {
	tests := []struct {
		name   string
		change func(h *admissionregistrationv1.MutatingWebhook)
		want   string // substring of the errors; "" means valid
	}{
		{"valid", func(*admissionregistrationv1.MutatingWebhook) {}, ""},
		{"name not qualified", func(h *admissionregistrationv1.MutatingWebhook) { h.Name = "inject" },
			"webhooks[0].name: Invalid value: \"inject\": should be a domain with at least three segments separated by dots"},
		{"no client config", func(h *admissionregistrationv1.MutatingWebhook) { h.ClientConfig.URL = nil },
			"webhooks[0].clientConfig: Required value: exactly one of url or service is required"},
		{"url and service", func(h *admissionregistrationv1.MutatingWebhook) {
			h.ClientConfig.Service = &admissionregistrationv1.ServiceReference{Namespace: "a", Name: "b"}
		}, "exactly one of url or service is required"},
		{"http url", func(h *admissionregistrationv1.MutatingWebhook) { h.ClientConfig.URL = ptr.To("http://127.0.0.1/") },
			"webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme"},
		{"no side effects", func(h *admissionregistrationv1.MutatingWebhook) { h.SideEffects = nil },
			"webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"},
		{"side effects Some", func(h *admissionregistrationv1.MutatingWebhook) {
			h.SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
		},
			"webhooks[0].sideEffects: Unsupported value: \"Some\""},
		{"no review versions", func(h *admissionregistrationv1.MutatingWebhook) { h.AdmissionReviewVersions = nil },
			"webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"},
		{"unknown review version", func(h *admissionregistrationv1.MutatingWebhook) { h.AdmissionReviewVersions = []string{"v2"} },
			"must include at least one of v1, v1beta1"},
		{"bad operation", func(h *admissionregistrationv1.MutatingWebhook) {
			h.Rules[0].Operations = []admissionregistrationv1.OperationType{"PATCH"}
		},
			"webhooks[0].rules[0].operations[0]: Unsupported value: \"PATCH\""},
		{"wildcard with others", func(h *admissionregistrationv1.MutatingWebhook) { h.Rules[0].Resources = []string{"*", "pods"} },
			"if '*' is present, must not specify other resources without subresources"},
		{"timeout", func(h *admissionregistrationv1.MutatingWebhook) { h.TimeoutSeconds = ptr.To[int32](31) },
			"the timeout value must be between 1 and 30 seconds"},
		{"match condition compiles", func(h *admissionregistrationv1.MutatingWebhook) {
			h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "ok", Expression: "object.metadata.name != 'x'"}}
		}, ""},
		{"match condition does not compile", func(h *admissionregistrationv1.MutatingWebhook) {
			h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "bad", Expression: "object.metadata.name +"}}
		}, "webhooks[0].matchConditions[0].expression: Invalid value: \"object.metadata.name +\": compilation failed"},
		{"match condition not bool", func(h *admissionregistrationv1.MutatingWebhook) {
			h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "str", Expression: "'x'"}}
		}, "must evaluate to bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validMutatingConfiguration()
			tt.change(&c.Webhooks[0])
			defaultMutatingWebhookConfiguration(c)
			errs := validateMutatingWebhookConfiguration(c)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("errors: %v", errs)
				}
				return
			}
			if !strings.Contains(errs.ToAggregate().Error(), tt.want) {
				t.Fatalf("errors %v, want %q", errs, tt.want)
			}
		})
	}
}

func TestValidateWebhookConfigurationDuplicateNames(t *testing.T) {
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"}}
	for range 2 {
		c.Webhooks = append(c.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: "a.b.c",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1/")},
			SideEffects:  ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}})
	}
	if errs := validateValidatingWebhookConfiguration(c); !strings.Contains(errs.ToAggregate().Error(), "webhooks[1].name: Duplicate value: \"a.b.c\"") {
		t.Fatalf("errors %v", errs)
	}
}
