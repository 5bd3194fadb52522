package schemas

import (
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"
)

// admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (+status) and
// ValidatingAdmissionPolicyBinding: kube's defaults (SetDefaults_
// ValidatingAdmissionPolicySpec, SetDefaults_MatchResources), validation
// (pkg/apis/admissionregistration/validation: every expression compiled by
// k8s.io/apiserver's CEL compiler, variables composited as the plugin
// compiles them) and printer columns (NAME VALIDATIONS PARAMKIND AGE, NAME
// POLICYNAME PARAMREF AGE).

func admissionPolicyResources(now func() time.Time) []*Resource {
	return []*Resource{
		{
			GroupVersion: gvAdmissionRegistration, Kind: "ValidatingAdmissionPolicy",
			Plural: "validatingadmissionpolicies", Singular: "validatingadmissionpolicy", Categories: []string{"api-extensions"},
			Subresources: []string{"status"},
			New:          func() Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
			NewList:      func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyList{} },
			Default:      defaulter(defaultValidatingAdmissionPolicy),
			PrepareForCreate: defaulter(func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
				p.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
			}),
			PrepareForUpdate:       preparer(prepareValidatingAdmissionPolicyUpdate),
			PrepareForStatusUpdate: preparer(prepareValidatingAdmissionPolicyStatusUpdate),
			ValidateCreate:         createValidator(false, validateValidatingAdmissionPolicy),
			ValidateUpdate:         updateValidator(false, validateValidatingAdmissionPolicyUpdate),
			ValidateStatusUpdate:   updateValidator(false, validateValidatingAdmissionPolicyStatusUpdate),
			Fields:                 fieldser[*admissionregistrationv1.ValidatingAdmissionPolicy](false, nil),
			Table:                  validatingAdmissionPolicyTable(now),
		},
		{
			GroupVersion: gvAdmissionRegistration, Kind: "ValidatingAdmissionPolicyBinding",
			Plural: "validatingadmissionpolicybindings", Singular: "validatingadmissionpolicybinding", Categories: []string{"api-extensions"},
			New:              func() Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
			NewList:          func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{} },
			Default:          defaulter(defaultValidatingAdmissionPolicyBinding),
			PrepareForCreate: defaulter(prepareNothing[*admissionregistrationv1.ValidatingAdmissionPolicyBinding]),
			PrepareForUpdate: preparer(func(b, old *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
				if equality.Semantic.DeepEqual(b.Spec, old.Spec) {
					keepGeneration(b, old)
					return
				}
				b.Generation = old.Generation + 1
			}),
			ValidateCreate: createValidator(false, validateValidatingAdmissionPolicyBinding),
			ValidateUpdate: updateValidator(false, func(b, _ *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
				return validateValidatingAdmissionPolicyBinding(b)
			}),
			Fields: fieldser[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](false, nil),
			Table:  validatingAdmissionPolicyBindingTable(now),
		},
	}
}

func prepareValidatingAdmissionPolicyUpdate(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) {
	p.Status = old.Status
	if equality.Semantic.DeepEqual(p.Spec, old.Spec) {
		keepGeneration(p, old)
		return
	}
	p.Generation = old.Generation + 1
}

func prepareValidatingAdmissionPolicyStatusUpdate(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) {
	keepGeneration(p, old)
	p.Spec = old.Spec
	p.DeletionTimestamp = old.DeletionTimestamp
	p.Labels = old.Labels
	p.Annotations = old.Annotations
	p.Finalizers = old.Finalizers
	p.OwnerReferences = old.OwnerReferences
}

func validatingAdmissionPolicyTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation rules defined in this configuration"},
		{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"},
		ageColumn,
	}
	return tableOf(cols, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) []any {
		paramKind := "<unset>"
		if pk := p.Spec.ParamKind; pk != nil {
			paramKind = pk.APIVersion + "/" + pk.Kind
		}
		return []any{p.Name, int64(len(p.Spec.Validations)), paramKind, since(now, p.CreationTimestamp)}
	})
}

func validatingAdmissionPolicyBindingTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "PolicyName", Type: "string", Description: "PolicyName indicates the policy definition which the policy binding binded to"},
		{Name: "ParamRef", Type: "string", Description: "ParamRef indicates the param resource which sets the configration param"},
		ageColumn,
	}
	return tableOf(cols, func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) []any {
		paramName := "<unset>"
		if pr := b.Spec.ParamRef; pr != nil {
			switch {
			case pr.Name != "" && pr.Namespace != "":
				paramName = pr.Namespace + "/" + pr.Name
			case pr.Name != "":
				// Whether the param kind is namespaced is not known
				// here: kube prints any namespace.
				paramName = "*/" + pr.Name
			case pr.Selector != nil:
				paramName = pr.Selector.String()
			}
		}
		return []any{b.Name, b.Spec.PolicyName, paramName, since(now, b.CreationTimestamp)}
	})
}

// Defaults.

func defaultValidatingAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	}
	if p.Spec.MatchConstraints != nil {
		defaultMatchResources(p.Spec.MatchConstraints)
	}
}

func defaultValidatingAdmissionPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	if b.Spec.MatchResources != nil {
		defaultMatchResources(b.Spec.MatchResources)
	}
}

func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rs := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rs {
			if rs[i].Scope == nil {
				rs[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
			}
		}
	}
}

// Validation.

var (
	supportedValidationReasons = sets.New(string(metav1.StatusReasonForbidden), string(metav1.StatusReasonInvalid),
		string(metav1.StatusReasonRequestEntityTooLarge), string(metav1.StatusReasonUnauthorized))
	supportedValidationActions = sets.New(string(admissionregistrationv1.Deny), string(admissionregistrationv1.Warn),
		string(admissionregistrationv1.Audit))
	supportedParamNotFoundActions = sets.New(string(admissionregistrationv1.AllowAction), string(admissionregistrationv1.DenyAction))
)

func validateValidatingAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	return validatePolicy(p, environment.NewExpressions)
}

// validateValidatingAdmissionPolicyUpdate compiles in the stored
// expressions' environment when the expressions did not change, as kube
// does, so that a policy stored by an older server stays updatable.
func validateValidatingAdmissionPolicyUpdate(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	env := environment.NewExpressions
	if equality.Semantic.DeepEqual(p.Spec.Validations, old.Spec.Validations) && equality.Semantic.DeepEqual(p.Spec.Variables, old.Spec.Variables) &&
		equality.Semantic.DeepEqual(p.Spec.MatchConditions, old.Spec.MatchConditions) && equality.Semantic.DeepEqual(p.Spec.AuditAnnotations, old.Spec.AuditAnnotations) {
		env = environment.StoredExpressions
	}
	return validatePolicy(p, env)
}

func validateValidatingAdmissionPolicyStatusUpdate(p, _ *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	var errs field.ErrorList
	if tc := p.Status.TypeChecking; tc != nil {
		for i, w := range tc.ExpressionWarnings {
			wp := field.NewPath("status", "typeChecking", "expressionWarnings").Index(i)
			if w.FieldRef == "" {
				errs = append(errs, field.Required(wp.Child("fieldRef"), ""))
			}
			if w.Warning == "" {
				errs = append(errs, field.Required(wp.Child("warning"), ""))
			}
		}
	}
	return errs
}

func validatePolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy, env environment.Type) field.ErrorList {
	errs := validateObjectMeta(&p.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metaPath)
	spec := p.Spec
	sp := field.NewPath("spec")
	if spec.FailurePolicy == nil {
		errs = append(errs, field.Required(sp.Child("failurePolicy"), ""))
	} else if !supportedFailurePolicies.Has(string(*spec.FailurePolicy)) {
		errs = append(errs, field.NotSupported(sp.Child("failurePolicy"), *spec.FailurePolicy, sets.List(supportedFailurePolicies)))
	}
	if pk := spec.ParamKind; pk != nil {
		pp := sp.Child("paramKind")
		if pk.Kind == "" {
			errs = append(errs, field.Required(pp.Child("kind"), ""))
		} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(pk.Kind)); len(msgs) > 0 {
			errs = append(errs, field.Invalid(pp.Child("kind"), pk.Kind, strings.Join(msgs, "; ")))
		}
		if pk.APIVersion == "" {
			errs = append(errs, field.Required(pp.Child("apiVersion"), ""))
		} else if gv, err := schema.ParseGroupVersion(pk.APIVersion); err != nil {
			errs = append(errs, field.Invalid(pp.Child("apiVersion"), pk.APIVersion, err.Error()))
		} else if gv.Version == "" {
			errs = append(errs, field.Invalid(pp.Child("apiVersion"), pk.APIVersion, "version must be specified"))
		}
	}
	if spec.MatchConstraints == nil {
		errs = append(errs, field.Required(sp.Child("matchConstraints"), ""))
	} else {
		errs = append(errs, validateMatchResources(spec.MatchConstraints, true, sp.Child("matchConstraints"))...)
	}
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		errs = append(errs, field.Required(sp.Child("validations"), "validations or auditAnnotations must contain at least one item"))
	}
	errs = append(errs, compilePolicyExpressions(p, env)...)
	return errs
}

// compilePolicyExpressions checks the variables, matchConditions,
// validations (expression, message, messageExpression, reason) and
// auditAnnotations, compiling them as the policy plugin does: variables
// first, into the composited environment the others see.
func compilePolicyExpressions(p *admissionregistrationv1.ValidatingAdmissionPolicy, env environment.Type) field.ErrorList {
	var errs field.ErrorList
	sp := field.NewPath("spec")
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return field.ErrorList{field.InternalError(sp, err)}
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	names := sets.New[string]()
	for i, v := range p.Spec.Variables {
		vp := sp.Child("variables").Index(i)
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(vp.Child("name"), "name is not specified"))
		case !isCELIdentifier(v.Name):
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, "name is not a valid CEL identifier"))
		case names.Has(v.Name):
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		names.Insert(v.Name)
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, field.Required(vp.Child("expression"), "expression is not specified"))
			continue
		}
		res := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, env)
		errs = append(errs, celErrors(res.Error, v.Expression, vp.Child("expression"))...)
	}
	errs = append(errs, validateMatchConditionsWith(p.Spec.MatchConditions, func(expr string, fp *field.Path) field.ErrorList {
		res := compiler.CompileCELExpression(&validating.ValidationCondition{Expression: expr}, opts, env)
		return celErrors(res.Error, expr, fp)
	}, sp.Child("matchConditions"))...)
	for i, v := range p.Spec.Validations {
		vp := sp.Child("validations").Index(i)
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, field.Required(vp.Child("expression"), "expression is not specified"))
		} else {
			res := compiler.CompileCELExpression(&validating.ValidationCondition{Expression: v.Expression}, opts, env)
			errs = append(errs, celErrors(res.Error, v.Expression, vp.Child("expression"))...)
		}
		if len(v.Message) > 0 && strings.TrimSpace(v.Message) == "" {
			errs = append(errs, field.Invalid(vp.Child("message"), v.Message, "message must be non-empty if specified"))
		} else if strings.Contains(v.Message, "\n") {
			errs = append(errs, field.Invalid(vp.Child("message"), v.Message, "message must not contain line breaks"))
		} else if len(v.Message) > 0 && strings.TrimSpace(v.Message) != v.Message {
			errs = append(errs, field.Invalid(vp.Child("message"), v.Message, "message must not contain leading or trailing whitespace"))
		}
		if v.MessageExpression != "" {
			if strings.TrimSpace(v.MessageExpression) == "" {
				errs = append(errs, field.Required(vp.Child("messageExpression"), "must be non-empty if specified"))
			} else {
				res := compiler.CompileCELExpression(&validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}, opts, env)
				errs = append(errs, celErrors(res.Error, v.MessageExpression, vp.Child("messageExpression"))...)
			}
		}
		if v.Reason != nil && !supportedValidationReasons.Has(string(*v.Reason)) {
			errs = append(errs, field.NotSupported(vp.Child("reason"), *v.Reason, sets.List(supportedValidationReasons)))
		}
	}
	keys := sets.New[string]()
	for i, a := range p.Spec.AuditAnnotations {
		ap := sp.Child("auditAnnotations").Index(i)
		if a.Key == "" {
			errs = append(errs, field.Required(ap.Child("key"), ""))
		} else {
			// The key becomes the audit annotation POLICY/KEY.
			for _, msg := range utilvalidation.IsQualifiedName(p.Name + "/" + a.Key) {
				errs = append(errs, field.Invalid(ap.Child("key"), a.Key, msg))
			}
			if keys.Has(a.Key) {
				errs = append(errs, field.Duplicate(ap.Child("key"), a.Key))
			}
			keys.Insert(a.Key)
		}
		if strings.TrimSpace(a.ValueExpression) == "" {
			errs = append(errs, field.Required(ap.Child("valueExpression"), "valueExpression is not specified"))
			continue
		}
		res := compiler.CompileCELExpression(&validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}, opts, env)
		errs = append(errs, celErrors(res.Error, a.ValueExpression, ap.Child("valueExpression"))...)
	}
	return errs
}

// celErrors is kube's convertCELErrorToValidationError.
func celErrors(err *apiservercel.Error, expr string, p *field.Path) field.ErrorList {
	if err == nil {
		return nil
	}
	switch err.Type {
	case apiservercel.ErrorTypeRequired:
		return field.ErrorList{field.Required(p, err.Detail)}
	case apiservercel.ErrorTypeInvalid:
		return field.ErrorList{field.Invalid(p, expr, err.Detail)}
	}
	return field.ErrorList{field.InternalError(p, err)}
}

// isCELIdentifier: a letter or underscore, then letters, digits and
// underscores (kube's variable names).
func isCELIdentifier(s string) bool {
	for i, c := range s {
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// validateMatchResources is kube's validateMatchResources; a policy's
// matchConstraints must name resourceRules, a binding's need not.
func validateMatchResources(m *admissionregistrationv1.MatchResources, requireRules bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.MatchPolicy == nil {
		errs = append(errs, field.Required(p.Child("matchPolicy"), "must specify the default value"))
	} else if !supportedMatchPolicies.Has(string(*m.MatchPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *m.MatchPolicy, sets.List(supportedMatchPolicies)))
	}
	if m.NamespaceSelector == nil {
		errs = append(errs, field.Required(p.Child("namespaceSelector"), ""))
	} else {
		errs = append(errs, metavalidation.ValidateLabelSelector(m.NamespaceSelector, metavalidation.LabelSelectorValidationOptions{}, p.Child("namespaceSelector"))...)
	}
	if m.ObjectSelector == nil {
		errs = append(errs, field.Required(p.Child("objectSelector"), ""))
	} else {
		errs = append(errs, metavalidation.ValidateLabelSelector(m.ObjectSelector, metavalidation.LabelSelectorValidationOptions{}, p.Child("objectSelector"))...)
	}
	if requireRules && len(m.ResourceRules) == 0 {
		errs = append(errs, field.Required(p.Child("resourceRules"), ""))
	}
	for name, rs := range map[string][]admissionregistrationv1.NamedRuleWithOperations{"resourceRules": m.ResourceRules, "excludeResourceRules": m.ExcludeResourceRules} {
		for i := range rs {
			rp := p.Child(name).Index(i)
			r := rs[i]
			errs = append(errs, validateRuleWithOperations(&admissionregistrationv1.RuleWithOperations{Operations: r.Operations, Rule: r.Rule}, rp)...)
			for j, rn := range r.ResourceNames {
				for _, msg := range apivalidation.NameIsDNSSubdomain(rn, false) {
					errs = append(errs, field.Invalid(rp.Child("resourceNames").Index(j), rn, msg))
				}
			}
		}
	}
	return errs
}

func validateValidatingAdmissionPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	errs := validateObjectMeta(&b.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metaPath)
	sp := field.NewPath("spec")
	if b.Spec.PolicyName == "" {
		errs = append(errs, field.Required(sp.Child("policyName"), ""))
	} else {
		for _, msg := range apivalidation.NameIsDNSSubdomain(b.Spec.PolicyName, false) {
			errs = append(errs, field.Invalid(sp.Child("policyName"), b.Spec.PolicyName, msg))
		}
	}
	if pr := b.Spec.ParamRef; pr != nil {
		pp := sp.Child("paramRef")
		switch {
		case pr.Name != "" && pr.Selector != nil:
			errs = append(errs, field.Forbidden(pp.Child("name"), "name and selector are mutually exclusive"))
		case pr.Name == "" && pr.Selector == nil:
			errs = append(errs, field.Required(pp, "one of name or selector must be specified"))
		}
		if pr.Name != "" {
			for _, msg := range apivalidation.NameIsDNSSubdomain(pr.Name, false) {
				errs = append(errs, field.Invalid(pp.Child("name"), pr.Name, msg))
			}
		}
		if pr.Selector != nil {
			errs = append(errs, metavalidation.ValidateLabelSelector(pr.Selector, metavalidation.LabelSelectorValidationOptions{}, pp.Child("selector"))...)
		}
		if pr.Namespace != "" {
			for _, msg := range apivalidation.ValidateNamespaceName(pr.Namespace, false) {
				errs = append(errs, field.Invalid(pp.Child("namespace"), pr.Namespace, msg))
			}
		}
		if pr.ParameterNotFoundAction == nil {
			errs = append(errs, field.Required(pp.Child("parameterNotFoundAction"), ""))
		} else if !supportedParamNotFoundActions.Has(string(*pr.ParameterNotFoundAction)) {
			errs = append(errs, field.NotSupported(pp.Child("parameterNotFoundAction"), *pr.ParameterNotFoundAction, sets.List(supportedParamNotFoundActions)))
		}
	}
	if b.Spec.MatchResources != nil {
		errs = append(errs, validateMatchResources(b.Spec.MatchResources, false, sp.Child("matchResources"))...)
	}
	errs = append(errs, validateValidationActions(b.Spec.ValidationActions, sp.Child("validationActions"))...)
	return errs
}

func validateValidationActions(actions []admissionregistrationv1.ValidationAction, p *field.Path) field.ErrorList {
	if len(actions) == 0 {
		return field.ErrorList{field.Required(p, "at least one validation action is required")}
	}
	var errs field.ErrorList
	seen := sets.New[admissionregistrationv1.ValidationAction]()
	for i, a := range actions {
		if seen.Has(a) {
			errs = append(errs, field.Duplicate(p.Index(i), a))
		}
		seen.Insert(a)
		if !supportedValidationActions.Has(string(a)) {
			errs = append(errs, field.NotSupported(p.Index(i), a, sets.List(supportedValidationActions)))
		}
	}
	if seen.Has(admissionregistrationv1.Deny) && seen.Has(admissionregistrationv1.Warn) {
		errs = append(errs, field.Invalid(p, actions, fmt.Sprintf("must not contain both %s and %s (repeating the same validation failure information in the API response and headers serves no purpose)",
			admissionregistrationv1.Deny, admissionregistrationv1.Warn)))
	}
	return errs
}
