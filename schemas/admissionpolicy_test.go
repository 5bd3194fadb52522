package schemas

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func validPolicy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "max-replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Variables:       []admissionregistrationv1.Variable{{Name: "replicas", Expression: "object.spec.replicas"}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "not-system", Expression: "request.namespace != 'kube-system'"}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "variables.replicas <= int(params.data.max)", MessageExpression: "'at most ' + params.data.max",
				Reason: ptr.To(metav1.StatusReasonInvalid),
			}},
			AuditAnnotations: []admissionregistrationv1.AuditAnnotation{{Key: "replicas", ValueExpression: "string(variables.replicas)"}},
		},
	}
	defaultValidatingAdmissionPolicy(p)
	return p
}

// TestValidateValidatingAdmissionPolicy: kube's validation of policies
// with every expression compiled by k8s.io/apiserver's CEL compiler.
func TestValidateValidatingAdmissionPolicy(t *testing.T) {
	if errs := validateValidatingAdmissionPolicy(validPolicy()); len(errs) > 0 {
		t.Fatalf("valid policy: %v", errs)
	}
	if p := validPolicy(); *p.Spec.FailurePolicy != admissionregistrationv1.Fail || *p.Spec.MatchConstraints.MatchPolicy != admissionregistrationv1.Equivalent ||
		*p.Spec.MatchConstraints.ResourceRules[0].Scope != admissionregistrationv1.AllScopes || p.Spec.MatchConstraints.NamespaceSelector == nil {
		t.Errorf("defaults: %+v", p.Spec)
	}
	tests := []struct {
		name   string
		mutate func(*admissionregistrationv1.ValidatingAdmissionPolicy)
		want   string
	}{
		{"bad expression", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Expression = "object.spec.replicas <"
		},
			"spec.validations[0].expression: Invalid value"},
		{"non-bool expression", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.Validations[0].Expression = "'x'" },
			"spec.validations[0].expression: Invalid value"},
		{"params without paramKind", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.ParamKind = nil },
			"spec.validations[0].expression: Invalid value"},
		{"bad messageExpression", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].MessageExpression = "1 +"
		},
			"spec.validations[0].messageExpression: Invalid value"},
		{"message with line break", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.Validations[0].Message = "a\nb" },
			"spec.validations[0].message: Invalid value"},
		{"bad reason", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Reason = ptr.To(metav1.StatusReasonConflict)
		}, "spec.validations[0].reason: Unsupported value"},
		{"bad variable name", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.Variables[0].Name = "1x" },
			"spec.variables[0].name: Invalid value"},
		{"undefined variable", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.Variables = nil },
			"spec.validations[0].expression: Invalid value"},
		{"bad match condition", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.MatchConditions[0].Expression = "1" },
			"spec.matchConditions[0].expression: Invalid value"},
		{"no rules", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConstraints.ResourceRules = nil
		},
			"spec.matchConstraints.resourceRules: Required value"},
		{"no matchConstraints", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.MatchConstraints = nil },
			"spec.matchConstraints: Required value"},
		{"nothing to validate", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations, p.Spec.AuditAnnotations = nil, nil
		}, "spec.validations: Required value: validations or auditAnnotations must contain at least one item"},
		{"bad failurePolicy", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.FailurePolicyType("Maybe"))
		}, "spec.failurePolicy: Unsupported value"},
		{"bad paramKind", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.ParamKind.APIVersion = "a/b/c" },
			"spec.paramKind.apiVersion: Invalid value"},
		{"bad audit annotation", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.AuditAnnotations[0].ValueExpression = "1"
		},
			"spec.auditAnnotations[0].valueExpression: Invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPolicy()
			tt.mutate(p)
			errs := validateValidatingAdmissionPolicy(p)
			if !strings.Contains(errs.ToAggregate().Error(), tt.want) {
				t.Errorf("errors %v, want %q", errs, tt.want)
			}
		})
	}
}

func TestValidateValidatingAdmissionPolicyBinding(t *testing.T) {
	valid := func() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        "max-replicas",
				ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)},
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			},
		}
	}
	if errs := validateValidatingAdmissionPolicyBinding(valid()); len(errs) > 0 {
		t.Fatalf("valid binding: %v", errs)
	}
	tests := []struct {
		name   string
		mutate func(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		want   string
	}{
		{"no policy", func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { b.Spec.PolicyName = "" }, "spec.policyName: Required value"},
		{"no actions", func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { b.Spec.ValidationActions = nil }, "spec.validationActions: Required value"},
		{"deny and warn", func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = append(b.Spec.ValidationActions, admissionregistrationv1.Warn)
		}, "must not contain both Deny and Warn"},
		{"name and selector", func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ParamRef.Selector = &metav1.LabelSelector{}
		},
			"spec.paramRef.name: Forbidden"},
		{"no paramNotFoundAction", func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ParamRef.ParameterNotFoundAction = nil
		},
			"spec.paramRef.parameterNotFoundAction: Required value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := valid()
			tt.mutate(b)
			if errs := validateValidatingAdmissionPolicyBinding(b); !strings.Contains(errs.ToAggregate().Error(), tt.want) {
				t.Errorf("errors %v, want %q", errs, tt.want)
			}
		})
	}
}
