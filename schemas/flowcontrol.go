package schemas

import (
	"fmt"
	"slices"
	"strings"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/util/shufflesharding"
	"k8s.io/utils/ptr"
)

// flowcontrol.apiserver.k8s.io/v1 FlowSchema and PriorityLevelConfiguration
// (both +status), the configuration of API Priority and Fairness: kube's
// defaults (pkg/apis/flowcontrol/v1/defaults.go), strategies
// (pkg/registry/flowcontrol: status kept on update, generation bumped
// when the spec changes), validation (pkg/apis/flowcontrol/validation, as
// v1 has it: zero nominal concurrency shares allowed) and printer columns.

var gvFlowControl = flowcontrolv1.SchemeGroupVersion

func flowControlResources(now func() time.Time) []*Resource {
	return []*Resource{
		{
			GroupVersion: gvFlowControl, Kind: "FlowSchema", Plural: "flowschemas", Singular: "flowschema",
			Subresources:           []string{"status"},
			New:                    func() Object { return &flowcontrolv1.FlowSchema{} },
			NewList:                func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
			Default:                defaulter(defaultFlowSchema),
			PrepareForCreate:       defaulter(func(fs *flowcontrolv1.FlowSchema) { fs.Generation, fs.Status = 1, flowcontrolv1.FlowSchemaStatus{} }),
			PrepareForUpdate:       preparer(prepareFlowSchemaUpdate),
			PrepareForStatusUpdate: preparer(prepareFlowSchemaStatusUpdate),
			ValidateCreate:         createValidator(false, validateFlowSchema),
			ValidateUpdate:         updateValidator(false, func(fs, _ *flowcontrolv1.FlowSchema) field.ErrorList { return validateFlowSchema(fs) }),
			ValidateStatusUpdate: updateValidator(false, func(fs, _ *flowcontrolv1.FlowSchema) field.ErrorList {
				return validateConditionTypes(fs.Status.Conditions, func(c flowcontrolv1.FlowSchemaCondition) string { return string(c.Type) })
			}),
			Fields: fieldser[*flowcontrolv1.FlowSchema](false, nil),
			Table:  flowSchemaTable(now),
		},
		{
			GroupVersion: gvFlowControl, Kind: "PriorityLevelConfiguration", Plural: "prioritylevelconfigurations",
			Singular: "prioritylevelconfiguration", Subresources: []string{"status"},
			New:     func() Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
			NewList: func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
			Default: defaulter(defaultPriorityLevel),
			PrepareForCreate: defaulter(func(pl *flowcontrolv1.PriorityLevelConfiguration) {
				pl.Generation, pl.Status = 1, flowcontrolv1.PriorityLevelConfigurationStatus{}
			}),
			PrepareForUpdate:       preparer(preparePriorityLevelUpdate),
			PrepareForStatusUpdate: preparer(preparePriorityLevelStatusUpdate),
			ValidateCreate:         createValidator(false, validatePriorityLevel),
			ValidateUpdate: updateValidator(false, func(pl, _ *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
				return validatePriorityLevel(pl)
			}),
			ValidateStatusUpdate: updateValidator(false, func(pl, _ *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
				return validateConditionTypes(pl.Status.Conditions, func(c flowcontrolv1.PriorityLevelConfigurationCondition) string { return string(c.Type) })
			}),
			Fields: fieldser[*flowcontrolv1.PriorityLevelConfiguration](false, nil),
			Table:  priorityLevelTable(now),
		},
	}
}

// Strategies.

func prepareFlowSchemaUpdate(fs, old *flowcontrolv1.FlowSchema) {
	fs.Status = old.Status
	keepGeneration(fs, old)
	if !equality.Semantic.DeepEqual(fs.Spec, old.Spec) {
		fs.Generation = old.Generation + 1
	}
}

func prepareFlowSchemaStatusUpdate(fs, old *flowcontrolv1.FlowSchema) {
	keepGeneration(fs, old)
	fs.Spec = old.Spec
}

func preparePriorityLevelUpdate(pl, old *flowcontrolv1.PriorityLevelConfiguration) {
	pl.Status = old.Status
	keepGeneration(pl, old)
	if !equality.Semantic.DeepEqual(pl.Spec, old.Spec) {
		pl.Generation = old.Generation + 1
	}
}

func preparePriorityLevelStatusUpdate(pl, old *flowcontrolv1.PriorityLevelConfiguration) {
	keepGeneration(pl, old)
	pl.Spec = old.Spec
}

// Defaults.

func defaultFlowSchema(fs *flowcontrolv1.FlowSchema) {
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = fcDefaultMatchingPrecedence
	}
}

func defaultPriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration) {
	if e := pl.Spec.Exempt; e != nil {
		e.NominalConcurrencyShares = cmpPtr(e.NominalConcurrencyShares, 0)
		e.LendablePercent = cmpPtr(e.LendablePercent, 0)
	}
	l := pl.Spec.Limited
	if l == nil {
		return
	}
	l.NominalConcurrencyShares = cmpPtr(l.NominalConcurrencyShares, fcDefaultShares)
	l.LendablePercent = cmpPtr(l.LendablePercent, 0)
	if q := l.LimitResponse.Queuing; q != nil {
		if q.HandSize == 0 {
			q.HandSize = fcDefaultHandSize
		}
		if q.Queues == 0 {
			q.Queues = fcDefaultQueues
		}
		if q.QueueLengthLimit == 0 {
			q.QueueLengthLimit = fcDefaultQueueLengthLimit
		}
	}
}

func cmpPtr(p *int32, def int32) *int32 {
	if p == nil {
		return ptr.To(def)
	}
	return p
}

// Validation.

var (
	fcDistinguisherMethods = sets.New(string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType))
	fcVerbs                = sets.New("get", "list", "create", "update", "delete", "deletecollection", "patch", "watch", "proxy")
	fcSubjectKinds         = sets.New(string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindUser))
	fcEnablements          = sets.New(string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited))
	fcLimitResponses       = sets.New(string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject))
)

// kube's v1 defaults (pkg/apis/flowcontrol/v1/defaults.go).
const (
	fcDefaultMatchingPrecedence int32 = 1000
	fcDefaultShares             int32 = 30
	fcDefaultHandSize           int32 = 8
	fcDefaultQueues             int32 = 64
	fcDefaultQueueLengthLimit   int32 = 50
)

const (
	fcMaxQueues = 10 * 1000 * 1000
	fcNSIntro   = "each member of this list must be '*' or a DNS-1123 label; "
)

func validateFlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	errs := dnsSubdomainName(fs.Name)
	spec, p := &fs.Spec, field.NewPath("spec")
	if spec.MatchingPrecedence <= 0 {
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), spec.MatchingPrecedence, "must be a positive value"))
	}
	if spec.MatchingPrecedence > flowcontrolv1.FlowSchemaMaxMatchingPrecedence {
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), spec.MatchingPrecedence,
			fmt.Sprintf("must not be greater than %v", flowcontrolv1.FlowSchemaMaxMatchingPrecedence)))
	}
	if spec.MatchingPrecedence == 1 && fs.Name != flowcontrolv1.FlowSchemaNameExempt {
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), spec.MatchingPrecedence, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if dm := spec.DistinguisherMethod; dm != nil && !fcDistinguisherMethods.Has(string(dm.Type)) {
		errs = append(errs, field.NotSupported(p.Child("distinguisherMethod", "type"), dm.Type, sets.List(fcDistinguisherMethods)))
	}
	if name := spec.PriorityLevelConfiguration.Name; name == "" {
		errs = append(errs, field.Required(p.Child("priorityLevelConfiguration", "name"), "must reference a priority level"))
	} else {
		for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
			errs = append(errs, field.Invalid(p.Child("priorityLevelConfiguration", "name"), name, msg))
		}
	}
	for i := range spec.Rules {
		errs = append(errs, validatePolicyRules(&spec.Rules[i], p.Child("rules").Index(i))...)
	}
	return append(errs, validateConditionTypes(fs.Status.Conditions, func(c flowcontrolv1.FlowSchemaCondition) string { return string(c.Type) })...)
}

func dnsSubdomainName(name string) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		return errs // ValidateObjectMeta reports it
	}
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, msg))
	}
	return errs
}

func validatePolicyRules(rule *flowcontrolv1.PolicyRulesWithSubjects, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Subjects) == 0 {
		errs = append(errs, field.Required(p.Child("subjects"), "subjects must contain at least one value"))
	}
	for i := range rule.Subjects {
		errs = append(errs, validateFlowSubject(&rule.Subjects[i], p.Child("subjects").Index(i))...)
	}
	if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
		errs = append(errs, field.Required(p, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i, r := range rule.ResourceRules {
		rp := p.Child("resourceRules").Index(i)
		errs = append(errs, validateFlowVerbs(r.Verbs, rp.Child("verbs"))...)
		errs = append(errs, validateWildcardList(r.APIGroups, rp.Child("apiGroups"), "resource rules must supply at least one api group", "api groups")...)
		errs = append(errs, validateWildcardList(r.Resources, rp.Child("resources"), "resource rules must supply at least one resource", "resources")...)
		switch {
		case len(r.Namespaces) == 0 && !r.ClusterScope:
			errs = append(errs, field.Required(rp.Child("namespaces"), "resource rules that are not cluster scoped must supply at least one namespace"))
		case slices.Contains(r.Namespaces, flowcontrolv1.NamespaceEvery):
			if len(r.Namespaces) > 1 {
				errs = append(errs, field.Invalid(rp.Child("namespaces"), r.Namespaces, "if '*' is present, must not specify other namespaces"))
			}
		default:
			for j, ns := range r.Namespaces {
				for _, msg := range apivalidation.ValidateNamespaceName(ns, false) {
					errs = append(errs, field.Invalid(rp.Child("namespaces").Index(j), ns, fcNSIntro+msg))
				}
			}
		}
	}
	for i, r := range rule.NonResourceRules {
		rp := p.Child("nonResourceRules").Index(i)
		errs = append(errs, validateFlowVerbs(r.Verbs, rp.Child("verbs"))...)
		switch {
		case len(r.NonResourceURLs) == 0:
			errs = append(errs, field.Required(rp.Child("nonResourceURLs"), "nonResourceURLs must contain at least one value"))
		case slices.Contains(r.NonResourceURLs, "*"):
			if len(r.NonResourceURLs) > 1 {
				errs = append(errs, field.Invalid(rp.Child("nonResourceURLs"), r.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
			}
		default:
			for j, u := range r.NonResourceURLs {
				if msg := nonResourceURLError(u); msg != "" {
					errs = append(errs, field.Invalid(rp.Child("nonResourceURLs").Index(j), u, msg))
				}
			}
		}
	}
	return errs
}

func validateFlowVerbs(verbs []string, p *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(p, "verbs must contain at least one value")}
	case slices.Contains(verbs, "*"):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(p, verbs, "if '*' is present, must not specify other verbs")}
		}
	case !fcVerbs.HasAll(verbs...):
		return field.ErrorList{field.NotSupported(p, verbs, sets.List(fcVerbs))}
	}
	return nil
}

func validateWildcardList(list []string, p *field.Path, required, what string) field.ErrorList {
	switch {
	case len(list) == 0:
		return field.ErrorList{field.Required(p, required)}
	case len(list) > 1 && slices.Contains(list, "*"):
		return field.ErrorList{field.Invalid(p, list, "if '*' is present, must not specify other "+what)}
	}
	return nil
}

// nonResourceURLError is kube's ValidateNonResourceURLPath: a leading
// slash, no white space or double slash, "*" only as a "/*" suffix.
func nonResourceURLError(path string) string {
	switch {
	case path == "":
		return "must not be empty"
	case path == "/":
		return ""
	case !strings.HasPrefix(path, "/"):
		return "must start with slash"
	case strings.Contains(path, " "):
		return "must not contain white-space"
	case strings.Contains(path, "//"):
		return "must not contain double slash"
	}
	if n := strings.Count(path, "*"); n > 1 || (n == 1 && !strings.HasSuffix(path, "/*")) {
		return "wildcard can only do suffix matching"
	}
	return ""
}

func validateFlowSubject(s *flowcontrolv1.Subject, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbid := func(set bool, name, kind string) {
		if set {
			errs = append(errs, field.Forbidden(p.Child(name), fmt.Sprintf("%s is forbidden when subject kind is not '%s'", name, kind)))
		}
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		sp := p.Child("serviceAccount")
		switch sa := s.ServiceAccount; {
		case sa == nil:
			errs = append(errs, field.Required(sp, "serviceAccount is required when subject kind is 'ServiceAccount'"))
		default:
			if sa.Name == "" {
				errs = append(errs, field.Required(sp.Child("name"), ""))
			} else if sa.Name != flowcontrolv1.NameAll {
				for _, msg := range apivalidation.ValidateServiceAccountName(sa.Name, false) {
					errs = append(errs, field.Invalid(sp.Child("name"), sa.Name, msg))
				}
			}
			if sa.Namespace == "" {
				errs = append(errs, field.Required(sp.Child("namespace"), "must specify namespace for service account"))
			}
			for _, msg := range apivalidation.ValidateNamespaceName(sa.Namespace, false) {
				if sa.Namespace != "" {
					errs = append(errs, field.Invalid(sp.Child("namespace"), sa.Namespace, msg))
				}
			}
		}
		forbid(s.User != nil, "user", "User")
		forbid(s.Group != nil, "group", "Group")
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			errs = append(errs, field.Required(p.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			errs = append(errs, field.Required(p.Child("user", "name"), ""))
		}
		forbid(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
		forbid(s.Group != nil, "group", "Group")
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			errs = append(errs, field.Required(p.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			errs = append(errs, field.Required(p.Child("group", "name"), ""))
		}
		forbid(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
		forbid(s.User != nil, "user", "User")
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, sets.List(fcSubjectKinds)))
	}
	return errs
}

func validatePriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	errs := dnsSubdomainName(pl.Name)
	spec, p := &pl.Spec, field.NewPath("spec")
	if (pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		errs = append(errs, field.Invalid(p.Child("type"), spec.Type, "type must be 'Exempt' if and only if name is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			errs = append(errs, field.Forbidden(p.Child("limited"), "must be nil if the type is not Limited"))
		}
		if e := spec.Exempt; e != nil {
			errs = append(errs, validateShares(e.NominalConcurrencyShares, e.LendablePercent, p.Child("exempt"))...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			errs = append(errs, field.Forbidden(p.Child("exempt"), "must be nil if the type is Limited"))
		}
		l := spec.Limited
		if l == nil {
			errs = append(errs, field.Required(p.Child("limited"), "must not be empty when type is Limited"))
			break
		}
		lp := p.Child("limited")
		errs = append(errs, validateShares(l.NominalConcurrencyShares, l.LendablePercent, lp)...)
		if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
			errs = append(errs, field.Invalid(lp.Child("borrowingLimitPercent"), *b, "if specified, must be a non-negative integer"))
		}
		errs = append(errs, validateLimitResponse(l.LimitResponse, lp.Child("limitResponse"))...)
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), spec.Type, sets.List(fcEnablements)))
	}
	return append(errs, validateConditionTypes(pl.Status.Conditions, func(c flowcontrolv1.PriorityLevelConfigurationCondition) string { return string(c.Type) })...)
}

func validateShares(shares, lendable *int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if shares != nil && *shares < 0 {
		errs = append(errs, field.Invalid(p.Child("nominalConcurrencyShares"), *shares, "must be a non-negative integer"))
	}
	if lendable != nil && (*lendable < 0 || *lendable > 100) {
		errs = append(errs, field.Invalid(p.Child("lendablePercent"), *lendable, "must be between 0 and 100, inclusive"))
	}
	return errs
}

func validateLimitResponse(lr flowcontrolv1.LimitResponse, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch lr.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if lr.Queuing != nil {
			errs = append(errs, field.Forbidden(p.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited"))
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		q := lr.Queuing
		qp := p.Child("queuing")
		if q == nil {
			return append(errs, field.Required(qp, "must not be empty if limited.limitResponse.type is Limited"))
		}
		if q.QueueLengthLimit <= 0 {
			errs = append(errs, field.Invalid(qp.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
		}
		if q.Queues <= 0 {
			errs = append(errs, field.Invalid(qp.Child("queues"), q.Queues, "must be positive"))
		} else if q.Queues > fcMaxQueues {
			errs = append(errs, field.Invalid(qp.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", fcMaxQueues)))
		}
		switch {
		case q.HandSize <= 0:
			errs = append(errs, field.Invalid(qp.Child("handSize"), q.HandSize, "must be positive"))
		case q.HandSize > q.Queues:
			errs = append(errs, field.Invalid(qp.Child("handSize"), q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
		case shufflesharding.RequiredEntropyBits(int(q.Queues), int(q.HandSize)) > shufflesharding.MaxHashBits:
			errs = append(errs, field.Invalid(qp.Child("handSize"), q.HandSize, fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d",
				q.Queues, q.HandSize, shufflesharding.MaxHashBits)))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), lr.Type, sets.List(fcLimitResponses)))
	}
	return errs
}

// validateConditionTypes is the status validation of both kinds: every
// condition has a type, no type twice.
func validateConditionTypes[C any](conds []C, typeOf func(C) string) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range conds {
		p := field.NewPath("status", "conditions").Index(i).Child("type")
		t := typeOf(c)
		if seen.Has(t) {
			errs = append(errs, field.Duplicate(p, t))
		}
		seen.Insert(t)
		if t == "" {
			errs = append(errs, field.Required(p, "must not be empty"))
		}
	}
	return errs
}

// Tables (printFlowSchema, printPriorityLevelConfiguration).

func flowSchemaTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "PriorityLevel", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]},
		{Name: "MatchingPrecedence", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["matchingPrecedence"]},
		{Name: "DistinguisherMethod", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["distinguisherMethod"]},
		ageColumn,
		{Name: "MissingPL", Type: "string", Description: "references a broken or non-existent PriorityLevelConfiguration"},
	}
	return tableOf(cols, func(fs *flowcontrolv1.FlowSchema) []any {
		method := "<none>"
		if dm := fs.Spec.DistinguisherMethod; dm != nil {
			method = string(dm.Type)
		}
		missing := "?"
		for _, c := range fs.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
				missing = string(c.Status)
				break
			}
		}
		return []any{fs.Name, fs.Spec.PriorityLevelConfiguration.Name, int64(fs.Spec.MatchingPrecedence), method, since(now, fs.CreationTimestamp), missing}
	})
}

func priorityLevelTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Type", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]},
		{Name: "NominalConcurrencyShares", Type: "string", Description: flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"]},
		{Name: "Queues", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queues"]},
		{Name: "HandSize", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["handSize"]},
		{Name: "QueueLengthLimit", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queueLengthLimit"]},
		ageColumn,
	}
	return tableOf(cols, func(pl *flowcontrolv1.PriorityLevelConfiguration) []any {
		var shares, queues, hand, qlen any = "<none>", "<none>", "<none>", "<none>"
		if l := pl.Spec.Limited; l != nil {
			shares = int64(ptr.Deref(l.NominalConcurrencyShares, 0))
			if q := l.LimitResponse.Queuing; q != nil {
				queues, hand, qlen = int64(q.Queues), int64(q.HandSize), int64(q.QueueLengthLimit)
			}
		}
		return []any{pl.Name, string(pl.Spec.Type), shares, queues, hand, qlen, since(now, pl.CreationTimestamp)}
	})
}
