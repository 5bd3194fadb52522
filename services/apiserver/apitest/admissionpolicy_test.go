package apitest

import (
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// replicasPolicy refuses Deployments with more than max replicas (a
// param's data.max when params is set).
func replicasPolicy(name string, withParams bool) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5", Message: "replicas must be no greater than 5"}},
		},
	}
	if withParams {
		p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		p.Spec.Validations = []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= int(params.data.max)",
			MessageExpression: "'replicas must be no greater than ' + params.data.max"}}
	}
	return p
}

// TestValidatingAdmissionPolicyAPI: policies and bindings are served with
// kube's defaults, validation (422 with a cause per field, CEL compile
// errors included, nothing written) and table columns; the status
// subresource keeps the spec.
func TestValidatingAdmissionPolicyAPI(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	policies := env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()

	bad := replicasPolicy("bad", false)
	bad.Spec.Validations = append(bad.Spec.Validations,
		admissionregistrationv1.Validation{Expression: "object.spec.replicas <"},
		admissionregistrationv1.Validation{Expression: "params.x == 1"}, // no paramKind
		admissionregistrationv1.Validation{Expression: "true", Reason: ptr(metav1.StatusReasonConflict)})
	bad.Spec.FailurePolicy = ptr(admissionregistrationv1.FailurePolicyType("Sometimes"))
	bad.Spec.Variables = []admissionregistrationv1.Variable{{Name: "9lives", Expression: "1"}}
	wantInvalid(t, env, "admissionregistration.k8s.io", "ValidatingAdmissionPolicy",
		[]string{"spec.failurePolicy", "spec.validations[1].expression", "spec.validations[2].expression", "spec.validations[3].reason", "spec.variables[0].name"},
		func() error { _, err := policies.Create(ctx, bad, metav1.CreateOptions{}); return err })
	wantInvalid(t, env, "admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding",
		[]string{"spec.paramRef", "spec.policyName", "spec.validationActions"}, func() error {
			_, err := bindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
					ParamRef: &admissionregistrationv1.ParamRef{ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)}}}, metav1.CreateOptions{})
			return err
		})

	p, err := policies.Create(ctx, replicasPolicy("max-replicas", true), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *p.Spec.FailurePolicy != admissionregistrationv1.Fail || *p.Spec.MatchConstraints.MatchPolicy != admissionregistrationv1.Equivalent ||
		p.Spec.MatchConstraints.NamespaceSelector == nil || *p.Spec.MatchConstraints.ResourceRules[0].Scope != admissionregistrationv1.AllScopes || p.Generation != 1 {
		t.Errorf("defaults %+v", p.Spec)
	}
	if _, err := bindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "max-replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "max-replicas",
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default", ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cols, rows := tableOf(t, env, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies")
	if strings.Join(cols, " ") != "Name Validations ParamKind Age" || len(rows) != 1 || rows[0][1] != float64(1) || rows[0][2] != "v1/ConfigMap" {
		t.Errorf("policy table %v %v", cols, rows)
	}
	cols, rows = tableOf(t, env, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings")
	if strings.Join(cols, " ") != "Name PolicyName ParamRef Age" || len(rows) != 1 || rows[0][1] != "max-replicas" || rows[0][2] != "default/limits" {
		t.Errorf("binding table %v %v", cols, rows)
	}

	// The status subresource writes status only.
	p.Status.ObservedGeneration = 1
	p.Spec.Validations = nil
	st, err := policies.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.ObservedGeneration != 1 || len(st.Spec.Validations) != 1 {
		t.Errorf("after a status write: %+v", st)
	}
}
