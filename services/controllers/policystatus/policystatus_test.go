package policystatus

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// policy matches CREATE and UPDATE of the resources of group/version,
// with paramKind set when params is.
func policy(name, group, version, resource string, params *admissionregistrationv1.ParamKind, v ...admissionregistrationv1.Validation) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind: params,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}},
				},
			}}},
			Validations: v,
		},
	}
}

// TestTypeChecking: the controller type checks each policy against the
// schemas of the kinds it matches and applies kube's status: a field that
// does not exist, in an expression or a messageExpression, or on the
// params, is a warning naming the kind, the field and the place; a
// correct policy gets an empty typeChecking; a changed spec is checked
// again (observedGeneration follows); a wildcard rule checks nothing.
func TestTypeChecking(t *testing.T) {
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("POLICYSTATUS_TEST_LOG"), nil)
	if _, err := New(m, Options{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	ctx := context.Background()
	policies := env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	establishKilns(t, env)
	configMaps := &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	tests := []struct {
		name   string
		policy *admissionregistrationv1.ValidatingAdmissionPolicy
		want   []admissionregistrationv1.ExpressionWarning // Warning: the start of kube's text
	}{
		{
			name:   "correct",
			policy: policy("correct", "apps", "v1", "deployments", nil, admissionregistrationv1.Validation{Expression: "object.spec.replicas <= 5", MessageExpression: "'replicas: ' + string(object.spec.replicas)"}),
		},
		{
			name:   "unknown field",
			policy: policy("replicaz", "apps", "v1", "deployments", nil, admissionregistrationv1.Validation{Expression: "object.spec.replicaz > 1"}),
			want: []admissionregistrationv1.ExpressionWarning{{FieldRef: "spec.validations[0].expression",
				Warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'"}},
		},
		{
			name: "message expression",
			policy: policy("message", "", "v1", "pods", nil,
				admissionregistrationv1.Validation{Expression: "object.spec.containers.size() < 10"},
				admissionregistrationv1.Validation{Expression: "true", MessageExpression: "'deadline: ' + object.spec.activeDeadlineSeconds"}),
			want: []admissionregistrationv1.ExpressionWarning{{FieldRef: "spec.validations[1].messageExpression",
				Warning: "/v1, Kind=Pod: ERROR: <input>:1:14: found no matching overload for '_+_' applied to '(string, int)'"}},
		},
		{
			name: "params",
			policy: policy("params", "", "v1", "configmaps", configMaps,
				admissionregistrationv1.Validation{Expression: "params.data.max == object.data.max"},
				admissionregistrationv1.Validation{Expression: "params.dataz.max == 'x'"}),
			want: []admissionregistrationv1.ExpressionWarning{{FieldRef: "spec.validations[1].expression",
				Warning: "/v1, Kind=ConfigMap: ERROR: <input>:1:7: undefined field 'dataz'"}},
		},
		{
			// A custom resource: its schema from the CRD, served once the
			// CRD is (the mapper rediscovers on a miss).
			name: "custom resource",
			policy: policy("kiln", "pottery.example.com", "v1", "kilns", nil,
				admissionregistrationv1.Validation{Expression: "object.spec.size <= 10"},
				admissionregistrationv1.Validation{Expression: "object.spec.sizez <= 10"}),
			want: []admissionregistrationv1.ExpressionWarning{{FieldRef: "spec.validations[1].expression",
				Warning: "pottery.example.com/v1, Kind=Kiln: ERROR: <input>:1:12: undefined field 'sizez'"}},
		},
		{
			// kube gives up on wildcards: nothing to check against.
			name:   "wildcard",
			policy: policy("wildcard", "*", "v1", "deployments", nil, admissionregistrationv1.Validation{Expression: "object.spec.replicaz > 1"}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := policies.Create(ctx, tt.policy, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := waitObserved(t, env, tt.policy.Name, 1)
			checkWarnings(t, p, tt.want)
		})
	}

	// A fixed policy is checked again and its warning goes.
	p, err := policies.Get(ctx, "replicaz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Validations[0].Expression = "object.spec.replicas > 1"
	if _, err := policies.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Server-side apply (structured-merge-diff, as in kube-apiserver)
	// prunes the typeChecking it emptied of the controller's warnings.
	if fixed := waitObserved(t, env, "replicaz", 2); fixed.Status.TypeChecking != nil && len(fixed.Status.TypeChecking.ExpressionWarnings) != 0 {
		t.Errorf("fixed policy: warnings %+v", fixed.Status.TypeChecking.ExpressionWarnings)
	}
	// The status is the controller's, applied as kube's.
	if got := managers(p); !strings.Contains(got, FieldManager+"/status") {
		p, _ = policies.Get(ctx, "replicaz", metav1.GetOptions{})
		if got = managers(p); !strings.Contains(got, FieldManager+"/status") {
			t.Errorf("managedFields %s: want %s on status", got, FieldManager)
		}
	}
}

// waitObserved waits until policy name's status observed generation gen.
func waitObserved(t *testing.T, env *controlplanetest.Env, name string, gen int64) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	var p *admissionregistrationv1.ValidatingAdmissionPolicy
	controlplanetest.Eventually(t, 30*time.Second, name+" observed", func() bool {
		var err error
		p, err = env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration >= gen
	})
	if p.Generation != gen || p.Status.ObservedGeneration != gen {
		t.Fatalf("generation %d observed %d, want %d", p.Generation, p.Status.ObservedGeneration, gen)
	}
	return p
}

// checkWarnings compares p's typeChecking with want (each Warning the
// start of the text, which goes on with the expression and a caret).
func checkWarnings(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, want []admissionregistrationv1.ExpressionWarning) {
	t.Helper()
	tc := p.Status.TypeChecking
	if tc == nil {
		t.Fatalf("status %+v: no typeChecking", p.Status)
	}
	if len(tc.ExpressionWarnings) != len(want) {
		t.Fatalf("warnings %+v, want %+v", tc.ExpressionWarnings, want)
	}
	for i, w := range want {
		got := tc.ExpressionWarnings[i]
		if got.FieldRef != w.FieldRef || !strings.HasPrefix(got.Warning, w.Warning) {
			t.Errorf("warning %d: %q %q, want %q %q...", i, got.FieldRef, got.Warning, w.FieldRef, w.Warning)
		}
	}
}

func managers(p *admissionregistrationv1.ValidatingAdmissionPolicy) string {
	var s []string
	for _, f := range p.ManagedFields {
		s = append(s, f.Manager+"/"+f.Subresource)
	}
	return strings.Join(s, ",")
}

// establishKilns creates the CRD of pottery.example.com/v1 Kilns (spec.size
// an integer) and waits until it is Established.
func establishKilns(t *testing.T, env *controlplanetest.Env) {
	t.Helper()
	crds := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "kilns.pottery.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "pottery.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "kilns", Singular: "kiln", Kind: "Kiln", ListKind: "KilnList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
					}}}}},
		},
	}
	ctx := context.Background()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Eventually(t, 30*time.Second, "CRD established", func() bool {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		return err == nil && apihelpers.IsCRDConditionTrue(got, apiextensionsv1.Established)
	})
}
