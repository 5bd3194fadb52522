package schemas

import (
	"fmt"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/utils/ptr"
)

// admissionregistration.k8s.io/v1: MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration, with kube's defaulting
// (pkg/apis/admissionregistration/v1 SetDefaults_*), validation
// (pkg/apis/admissionregistration/validation, matchConditions compiled by
// k8s.io/apiserver's CEL compiler as kube-apiserver compiles them) and
// printer columns (NAME WEBHOOKS AGE). Calling the webhooks is the
// apiserver's business (services/apiserver/webhook).

var gvAdmissionRegistration = admissionregistrationv1.SchemeGroupVersion

// admissionRegistrationResources are the two kinds, by plural.
func admissionRegistrationResources(now func() time.Time) []*Resource {
	return []*Resource{
		{
			GroupVersion: gvAdmissionRegistration, Kind: "MutatingWebhookConfiguration",
			Plural: "mutatingwebhookconfigurations", Singular: "mutatingwebhookconfiguration", Categories: []string{"api-extensions"},
			New:              func() Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
			NewList:          func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfigurationList{} },
			Default:          defaulter(defaultMutatingWebhookConfiguration),
			PrepareForCreate: defaulter(prepareNothing[*admissionregistrationv1.MutatingWebhookConfiguration]),
			PrepareForUpdate: preparer(prepareWebhookConfigurationUpdate[*admissionregistrationv1.MutatingWebhookConfiguration]),
			ValidateCreate:   createValidator(false, validateMutatingWebhookConfiguration),
			ValidateUpdate:   updateValidator(false, validateMutatingWebhookConfigurationUpdate),
			Fields:           fieldser[*admissionregistrationv1.MutatingWebhookConfiguration](false, nil),
			Table: webhookConfigurationTable(now, func(c *admissionregistrationv1.MutatingWebhookConfiguration) (metav1.ObjectMeta, int) {
				return c.ObjectMeta, len(c.Webhooks)
			}),
		},
		{
			GroupVersion: gvAdmissionRegistration, Kind: "ValidatingWebhookConfiguration",
			Plural: "validatingwebhookconfigurations", Singular: "validatingwebhookconfiguration", Categories: []string{"api-extensions"},
			New:              func() Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
			NewList:          func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} },
			Default:          defaulter(defaultValidatingWebhookConfiguration),
			PrepareForCreate: defaulter(prepareNothing[*admissionregistrationv1.ValidatingWebhookConfiguration]),
			PrepareForUpdate: preparer(prepareWebhookConfigurationUpdate[*admissionregistrationv1.ValidatingWebhookConfiguration]),
			ValidateCreate:   createValidator(false, validateValidatingWebhookConfiguration),
			ValidateUpdate:   updateValidator(false, validateValidatingWebhookConfigurationUpdate),
			Fields:           fieldser[*admissionregistrationv1.ValidatingWebhookConfiguration](false, nil),
			Table: webhookConfigurationTable(now, func(c *admissionregistrationv1.ValidatingWebhookConfiguration) (metav1.ObjectMeta, int) {
				return c.ObjectMeta, len(c.Webhooks)
			}),
		},
	}
}

// prepareWebhookConfigurationUpdate is the strategies' PrepareForUpdate:
// the generation moves when the webhooks change.
func prepareWebhookConfigurationUpdate[T Object](obj, old T) {
	if equalWebhooks(obj, old) {
		keepGeneration(obj, old)
		return
	}
	obj.SetGeneration(old.GetGeneration() + 1)
}

func equalWebhooks(obj, old Object) bool {
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		return equality.Semantic.DeepEqual(o.Webhooks, old.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks)
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		return equality.Semantic.DeepEqual(o.Webhooks, old.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks)
	}
	return false
}

func webhookConfigurationTable[T Object](now func() time.Time, parts func(T) (metav1.ObjectMeta, int)) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks included in this configuration"},
		ageColumn,
	}
	return tableOf(cols, func(c T) []any {
		m, n := parts(c)
		return []any{m.Name, int64(n), since(now, m.CreationTimestamp)}
	})
}

// Defaulting: SetDefaults_MutatingWebhook, SetDefaults_ValidatingWebhook,
// SetDefaults_Rule and SetDefaults_ServiceReference of v1.

func defaultMutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) {
	for i := range c.Webhooks {
		h := &c.Webhooks[i]
		defaultWebhook(&h.FailurePolicy, &h.MatchPolicy, &h.NamespaceSelector, &h.ObjectSelector, &h.TimeoutSeconds, h.Rules, &h.ClientConfig)
		if h.ReinvocationPolicy == nil {
			h.ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
		}
	}
}

func defaultValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
	for i := range c.Webhooks {
		h := &c.Webhooks[i]
		defaultWebhook(&h.FailurePolicy, &h.MatchPolicy, &h.NamespaceSelector, &h.ObjectSelector, &h.TimeoutSeconds, h.Rules, &h.ClientConfig)
	}
}

func defaultWebhook(fp **admissionregistrationv1.FailurePolicyType, mp **admissionregistrationv1.MatchPolicyType,
	ns, obj **metav1.LabelSelector, timeout **int32, rules []admissionregistrationv1.RuleWithOperations,
	cc *admissionregistrationv1.WebhookClientConfig) {
	if *fp == nil {
		*fp = ptr.To(admissionregistrationv1.Fail)
	}
	if *mp == nil {
		*mp = ptr.To(admissionregistrationv1.Equivalent)
	}
	if *ns == nil {
		*ns = &metav1.LabelSelector{}
	}
	if *obj == nil {
		*obj = &metav1.LabelSelector{}
	}
	if *timeout == nil {
		*timeout = ptr.To[int32](10)
	}
	for i := range rules {
		if rules[i].Scope == nil {
			rules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
		}
	}
	if cc.Service != nil && cc.Service.Port == nil {
		cc.Service.Port = ptr.To[int32](443)
	}
}

// Validation: kube's pkg/apis/admissionregistration/validation, for v1
// objects (the internal and v1 types have the same shape).

// webhookValidation is kube's validationOptions for webhooks.
type webhookValidation struct {
	ignoreMatchConditions     bool
	requireNoSideEffects      bool
	requireRecognizedReview   bool
	requireUniqueNames        bool
	allowInvalidLabelValue    bool
	storedMatchConditionExprs sets.Set[string]
}

var (
	supportedFailurePolicies      = sets.New(string(admissionregistrationv1.Ignore), string(admissionregistrationv1.Fail))
	supportedMatchPolicies        = sets.New(string(admissionregistrationv1.Exact), string(admissionregistrationv1.Equivalent))
	supportedReinvocationPolicies = sets.New(string(admissionregistrationv1.NeverReinvocationPolicy), string(admissionregistrationv1.IfNeededReinvocationPolicy))
	supportedSideEffectClasses    = sets.New(string(admissionregistrationv1.SideEffectClassUnknown), string(admissionregistrationv1.SideEffectClassNone),
		string(admissionregistrationv1.SideEffectClassSome), string(admissionregistrationv1.SideEffectClassNoneOnDryRun))
	noSideEffectClasses = sets.New(string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun))
	supportedOperations = sets.New(string(admissionregistrationv1.OperationAll), string(admissionregistrationv1.Create),
		string(admissionregistrationv1.Update), string(admissionregistrationv1.Delete), string(admissionregistrationv1.Connect))
	validScopes = sets.New(string(admissionregistrationv1.ClusterScope), string(admissionregistrationv1.NamespacedScope),
		string(admissionregistrationv1.AllScopes))
	// acceptedReviewVersions are the AdmissionReview versions kube's
	// validation accepts (cairn sends v1).
	acceptedReviewVersions = []string{"v1", "v1beta1"}
)

// webhookFields is what validation reads of one webhook, mutating or
// validating.
type webhookFields struct {
	name           string
	rules          []admissionregistrationv1.RuleWithOperations
	failurePolicy  *admissionregistrationv1.FailurePolicyType
	matchPolicy    *admissionregistrationv1.MatchPolicyType
	sideEffects    *admissionregistrationv1.SideEffectClass
	timeoutSeconds *int32
	nsSelector     *metav1.LabelSelector
	objSelector    *metav1.LabelSelector
	reinvocation   *admissionregistrationv1.ReinvocationPolicyType
	clientConfig   admissionregistrationv1.WebhookClientConfig
	matchConds     []admissionregistrationv1.MatchCondition
	reviewVersions []string
}

func mutatingFields(hs []admissionregistrationv1.MutatingWebhook) []webhookFields {
	out := make([]webhookFields, len(hs))
	for i, h := range hs {
		out[i] = webhookFields{h.Name, h.Rules, h.FailurePolicy, h.MatchPolicy, h.SideEffects, h.TimeoutSeconds, h.NamespaceSelector,
			h.ObjectSelector, h.ReinvocationPolicy, h.ClientConfig, h.MatchConditions, h.AdmissionReviewVersions}
	}
	return out
}

func validatingFields(hs []admissionregistrationv1.ValidatingWebhook) []webhookFields {
	out := make([]webhookFields, len(hs))
	for i, h := range hs {
		out[i] = webhookFields{h.Name, h.Rules, h.FailurePolicy, h.MatchPolicy, h.SideEffects, h.TimeoutSeconds, h.NamespaceSelector,
			h.ObjectSelector, nil, h.ClientConfig, h.MatchConditions, h.AdmissionReviewVersions}
	}
	return out
}

func createWebhookValidation() webhookValidation {
	return webhookValidation{requireNoSideEffects: true, requireRecognizedReview: true, requireUniqueNames: true,
		storedMatchConditionExprs: sets.New[string]()}
}

// updateWebhookValidation relaxes the checks an old object already failed,
// as ValidateMutatingWebhookConfigurationUpdate does, so that objects
// stored by older servers stay updatable.
func updateWebhookValidation(hs, old []webhookFields) webhookValidation {
	o := webhookValidation{requireNoSideEffects: true, requireRecognizedReview: true, requireUniqueNames: true,
		storedMatchConditionExprs: sets.New[string]()}
	names := sets.New[string]()
	for _, h := range old {
		if h.sideEffects == nil || !noSideEffectClasses.Has(string(*h.sideEffects)) {
			o.requireNoSideEffects = false
		}
		if len(h.reviewVersions) > 0 && !hasAcceptedReviewVersion(h.reviewVersions) {
			o.requireRecognizedReview = false
		}
		if names.Has(h.name) {
			o.requireUniqueNames = false
		}
		names.Insert(h.name)
		for _, sel := range []*metav1.LabelSelector{h.nsSelector, h.objSelector} {
			if sel != nil && len(metavalidation.ValidateLabelSelector(sel, metavalidation.LabelSelectorValidationOptions{}, nil)) > 0 {
				o.allowInvalidLabelValue = true
			}
		}
		for _, mc := range h.matchConds {
			o.storedMatchConditionExprs.Insert(mc.Expression)
		}
	}
	if len(hs) == len(old) {
		o.ignoreMatchConditions = true
		for i := range old {
			if !equality.Semantic.DeepEqual(hs[i].matchConds, old[i].matchConds) {
				o.ignoreMatchConditions = false
			}
		}
	}
	return o
}

func hasAcceptedReviewVersion(vs []string) bool {
	for _, v := range vs {
		for _, a := range acceptedReviewVersions {
			if v == a {
				return true
			}
		}
	}
	return false
}

func validateMutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	return validateWebhookConfiguration(&c.ObjectMeta, mutatingFields(c.Webhooks), true, createWebhookValidation())
}

func validateMutatingWebhookConfigurationUpdate(c, old *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	hs := mutatingFields(c.Webhooks)
	return validateWebhookConfiguration(&c.ObjectMeta, hs, true, updateWebhookValidation(hs, mutatingFields(old.Webhooks)))
}

func validateValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	return validateWebhookConfiguration(&c.ObjectMeta, validatingFields(c.Webhooks), false, createWebhookValidation())
}

func validateValidatingWebhookConfigurationUpdate(c, old *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	hs := validatingFields(c.Webhooks)
	return validateWebhookConfiguration(&c.ObjectMeta, hs, false, updateWebhookValidation(hs, validatingFields(old.Webhooks)))
}

func validateWebhookConfiguration(m *metav1.ObjectMeta, hs []webhookFields, mutating bool, o webhookValidation) field.ErrorList {
	errs := validateObjectMeta(m, false, apivalidation.NameIsDNSSubdomain, metaPath)
	names := sets.New[string]()
	for i, h := range hs {
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(&h, mutating, o, p)...)
		errs = append(errs, validateAdmissionReviewVersions(h.reviewVersions, o.requireRecognizedReview, p.Child("admissionReviewVersions"))...)
		if o.requireUniqueNames && h.name != "" {
			if names.Has(h.name) {
				errs = append(errs, field.Duplicate(p.Child("name"), h.name))
			}
			names.Insert(h.name)
		}
	}
	return errs
}

// validateWebhook is validateMutatingWebhook and validateValidatingWebhook.
func validateWebhook(h *webhookFields, mutating bool, o webhookValidation, p *field.Path) field.ErrorList {
	errs := utilvalidation.IsFullyQualifiedName(p.Child("name"), h.name)
	for i := range h.rules {
		errs = append(errs, validateRuleWithOperations(&h.rules[i], p.Child("rules").Index(i))...)
	}
	if h.failurePolicy != nil && !supportedFailurePolicies.Has(string(*h.failurePolicy)) {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *h.failurePolicy, sets.List(supportedFailurePolicies)))
	}
	if h.matchPolicy != nil && !supportedMatchPolicies.Has(string(*h.matchPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *h.matchPolicy, sets.List(supportedMatchPolicies)))
	}
	allowed := supportedSideEffectClasses
	if o.requireNoSideEffects {
		allowed = noSideEffectClasses
	}
	if h.sideEffects == nil {
		errs = append(errs, field.Required(p.Child("sideEffects"), fmt.Sprintf("must specify one of %v", strings.Join(sets.List(allowed), ", "))))
	} else if !allowed.Has(string(*h.sideEffects)) {
		errs = append(errs, field.NotSupported(p.Child("sideEffects"), *h.sideEffects, sets.List(allowed)))
	}
	if h.timeoutSeconds != nil && (*h.timeoutSeconds > 30 || *h.timeoutSeconds < 1) {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *h.timeoutSeconds, "the timeout value must be between 1 and 30 seconds"))
	}
	selOpts := metavalidation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: o.allowInvalidLabelValue}
	if h.nsSelector != nil {
		errs = append(errs, metavalidation.ValidateLabelSelector(h.nsSelector, selOpts, p.Child("namespaceSelector"))...)
	}
	if h.objSelector != nil {
		errs = append(errs, metavalidation.ValidateLabelSelector(h.objSelector, selOpts, p.Child("objectSelector"))...)
	}
	if mutating && h.reinvocation != nil && !supportedReinvocationPolicies.Has(string(*h.reinvocation)) {
		errs = append(errs, field.NotSupported(p.Child("reinvocationPolicy"), *h.reinvocation, sets.List(supportedReinvocationPolicies)))
	}
	cc := h.clientConfig
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		errs = append(errs, field.Required(p.Child("clientConfig"), "exactly one of url or service is required"))
	case cc.URL != nil:
		errs = append(errs, webhook.ValidateWebhookURL(p.Child("clientConfig").Child("url"), *cc.URL, true)...)
	case cc.Service != nil:
		errs = append(errs, webhook.ValidateWebhookService(p.Child("clientConfig").Child("service"), cc.Service.Name, cc.Service.Namespace,
			cc.Service.Path, ptr.Deref(cc.Service.Port, 443))...)
	}
	if !o.ignoreMatchConditions {
		errs = append(errs, validateMatchConditions(h.matchConds, o, p.Child("matchConditions"))...)
	}
	return errs
}

func validateAdmissionReviewVersions(versions []string, requireRecognized bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(versions) < 1 {
		return field.ErrorList{field.Required(p, fmt.Sprintf("must specify one of %v", strings.Join(acceptedReviewVersions, ", ")))}
	}
	seen := map[string]bool{}
	for i, v := range versions {
		if seen[v] {
			errs = append(errs, field.Invalid(p.Index(i), v, "duplicate version"))
			continue
		}
		seen[v] = true
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, msg))
		}
	}
	if requireRecognized && !hasAcceptedReviewVersion(versions) {
		errs = append(errs, field.Invalid(p, versions, fmt.Sprintf("must include at least one of %v", strings.Join(acceptedReviewVersions, ", "))))
	}
	return errs
}

func validateRuleWithOperations(r *admissionregistrationv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(p.Child("operations"), ""))
	}
	if len(r.Operations) > 1 && hasWildcard(r.Operations) {
		errs = append(errs, field.Invalid(p.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, op := range r.Operations {
		if !supportedOperations.Has(string(op)) {
			errs = append(errs, field.NotSupported(p.Child("operations").Index(i), op, sets.List(supportedOperations)))
		}
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), ""))
	}
	if len(r.APIGroups) > 1 && hasWildcard(r.APIGroups) {
		errs = append(errs, field.Invalid(p.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(p.Child("apiVersions"), ""))
	}
	if len(r.APIVersions) > 1 && hasWildcard(r.APIVersions) {
		errs = append(errs, field.Invalid(p.Child("apiVersions"), r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(p.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validateRuleResources(r.Resources, p.Child("resources"))...)
	if r.Scope != nil && !validScopes.Has(string(*r.Scope)) {
		errs = append(errs, field.NotSupported(p.Child("scope"), *r.Scope, sets.List(validScopes)))
	}
	return errs
}

func hasWildcard[T ~string](s []T) bool {
	for _, v := range s {
		if v == "*" {
			return true
		}
	}
	return false
}

// validateRuleResources is validateResources: resources with
// subresources, and the rules on combining "*", "*/*", "x/*" and "*/x".
func validateRuleResources(resources []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(p, ""))
	}
	withWildcardSub, subWithWildcardRes := sets.New[string](), sets.New[string]()
	double, single, plain := false, false, false
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(p.Index(i), ""))
			continue
		}
		double = double || rs == "*/*"
		single = single || rs == "*"
		res, sub, ok := strings.Cut(rs, "/")
		if !ok {
			plain = rs != "*"
			continue
		}
		if withWildcardSub.Has(res) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if subWithWildcardRes.Has(sub) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			withWildcardSub.Insert(res)
		}
		if res == "*" {
			subWithWildcardRes.Insert(sub)
		}
	}
	if len(resources) > 1 && double {
		errs = append(errs, field.Invalid(p, resources, "if '*/*' is present, must not specify other resources"))
	}
	if single && plain {
		errs = append(errs, field.Invalid(p, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

func validateMatchConditions(mcs []admissionregistrationv1.MatchCondition, o webhookValidation, p *field.Path) field.ErrorList {
	return validateMatchConditionsWith(mcs, func(expr string, p *field.Path) field.ErrorList {
		return compileMatchCondition(expr, o.storedMatchConditionExprs.Has(expr), p)
	}, p)
}

// validateMatchConditionsWith checks names and expressions of webhooks'
// and policies' matchConditions, compiling each expression with compile.
func validateMatchConditionsWith(mcs []admissionregistrationv1.MatchCondition, compile func(expr string, p *field.Path) field.ErrorList, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(mcs) > 64 {
		errs = append(errs, field.TooMany(p, len(mcs), 64))
	}
	names := sets.New[string]()
	for i, mc := range mcs {
		ip := p.Index(i)
		if expr := strings.TrimSpace(mc.Expression); expr == "" {
			errs = append(errs, field.Required(ip.Child("expression"), ""))
		} else {
			errs = append(errs, compile(expr, ip.Child("expression"))...)
		}
		if mc.Name == "" {
			errs = append(errs, field.Required(ip.Child("name"), ""))
		} else {
			for _, msg := range utilvalidation.IsQualifiedName(mc.Name) {
				errs = append(errs, field.Invalid(ip.Child("name"), mc.Name, msg))
			}
			if names.Has(mc.Name) {
				errs = append(errs, field.Duplicate(ip.Child("name"), mc.Name))
			}
			names.Insert(mc.Name)
		}
	}
	return errs
}

var (
	matchConditionCompilerOnce sync.Once
	matchConditionCompiler     plugincel.Compiler
)

// MatchConditionCompiler is the CEL compiler of webhook matchConditions:
// k8s.io/apiserver's, on its base environment at the default
// compatibility version
// shared by validation here and by the apiserver's webhook dispatcher.
func MatchConditionCompiler() plugincel.Compiler {
	matchConditionCompilerOnce.Do(func() {
		matchConditionCompiler = plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	})
	return matchConditionCompiler
}

// compileMatchCondition is validateMatchConditionsExpression: a compile
// error is the field error kube gives (convertCELErrorToValidationError).
func compileMatchCondition(expr string, stored bool, p *field.Path) field.ErrorList {
	envType := environment.NewExpressions
	if stored {
		envType = environment.StoredExpressions
	}
	res := MatchConditionCompiler().CompileCELExpression(&matchconditions.MatchCondition{Expression: expr},
		plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, envType)
	return celErrors(res.Error, expr, p)
}
