package schemas

import (
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// rbac.authorization.k8s.io/v1: Roles, ClusterRoles and their bindings, with
// kube's defaulting (SetDefaults_Subject and the roleRef's apiGroup),
// validation (pkg/apis/rbac/validation) and printer columns. Who may write
// them (escalation prevention) is the apiserver's business, not the
// strategy's.

var gvRBAC = rbacv1.SchemeGroupVersion

// rbacResources are the four kinds, in discovery order (by plural).
func rbacResources(now func() time.Time) []*Resource {
	return []*Resource{
		{
			GroupVersion: gvRBAC, Kind: "ClusterRoleBinding", Plural: "clusterrolebindings", Singular: "clusterrolebinding",
			New:              func() Object { return &rbacv1.ClusterRoleBinding{} },
			NewList:          func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
			Default:          defaulter(defaultClusterRoleBinding),
			PrepareForCreate: defaulter(prepareNothing[*rbacv1.ClusterRoleBinding]),
			PrepareForUpdate: preparer(prepareKeepGeneration[*rbacv1.ClusterRoleBinding]),
			ValidateCreate:   createValidator(false, validateClusterRoleBinding),
			ValidateUpdate:   updateValidator(false, validateClusterRoleBindingUpdate),
			Fields:           fieldser[*rbacv1.ClusterRoleBinding](false, nil),
			Table: bindingTable(now, func(b *rbacv1.ClusterRoleBinding) (metav1.ObjectMeta, rbacv1.RoleRef, []rbacv1.Subject) {
				return b.ObjectMeta, b.RoleRef, b.Subjects
			}),
		},
		{
			GroupVersion: gvRBAC, Kind: "ClusterRole", Plural: "clusterroles", Singular: "clusterrole",
			New:              func() Object { return &rbacv1.ClusterRole{} },
			NewList:          func() runtime.Object { return &rbacv1.ClusterRoleList{} },
			Default:          defaulter(prepareNothing[*rbacv1.ClusterRole]),
			PrepareForCreate: defaulter(prepareNothing[*rbacv1.ClusterRole]),
			PrepareForUpdate: preparer(prepareKeepGeneration[*rbacv1.ClusterRole]),
			ValidateCreate:   createValidator(false, validateClusterRole),
			ValidateUpdate:   updateValidator(false, func(r, _ *rbacv1.ClusterRole) field.ErrorList { return validateClusterRole(r) }),
			Fields:           fieldser[*rbacv1.ClusterRole](false, nil),
			Table:            roleTable[*rbacv1.ClusterRole](),
		},
		{
			GroupVersion: gvRBAC, Kind: "RoleBinding", Plural: "rolebindings", Singular: "rolebinding",
			Namespaced:       true,
			New:              func() Object { return &rbacv1.RoleBinding{} },
			NewList:          func() runtime.Object { return &rbacv1.RoleBindingList{} },
			Default:          defaulter(defaultRoleBinding),
			PrepareForCreate: defaulter(prepareNothing[*rbacv1.RoleBinding]),
			PrepareForUpdate: preparer(prepareKeepGeneration[*rbacv1.RoleBinding]),
			ValidateCreate:   createValidator(true, validateRoleBinding),
			ValidateUpdate:   updateValidator(true, validateRoleBindingUpdate),
			Fields:           fieldser[*rbacv1.RoleBinding](true, nil),
			Table: bindingTable(now, func(b *rbacv1.RoleBinding) (metav1.ObjectMeta, rbacv1.RoleRef, []rbacv1.Subject) {
				return b.ObjectMeta, b.RoleRef, b.Subjects
			}),
		},
		{
			GroupVersion: gvRBAC, Kind: "Role", Plural: "roles", Singular: "role",
			Namespaced:       true,
			New:              func() Object { return &rbacv1.Role{} },
			NewList:          func() runtime.Object { return &rbacv1.RoleList{} },
			Default:          defaulter(prepareNothing[*rbacv1.Role]),
			PrepareForCreate: defaulter(prepareNothing[*rbacv1.Role]),
			PrepareForUpdate: preparer(prepareKeepGeneration[*rbacv1.Role]),
			ValidateCreate:   createValidator(true, validateRole),
			ValidateUpdate:   updateValidator(true, func(r, _ *rbacv1.Role) field.ErrorList { return validateRole(r) }),
			Fields:           fieldser[*rbacv1.Role](true, nil),
			Table:            roleTable[*rbacv1.Role](),
		},
	}
}

// Defaulting: SetDefaults_RoleBinding, SetDefaults_ClusterRoleBinding and
// SetDefaults_Subject.

func defaultRoleBinding(b *rbacv1.RoleBinding) { defaultBinding(&b.RoleRef, b.Subjects) }

func defaultClusterRoleBinding(b *rbacv1.ClusterRoleBinding) {
	defaultBinding(&b.RoleRef, b.Subjects)
}

func defaultBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

// Validation: kube's pkg/apis/rbac/validation.

// validateRBACName is ValidateRBACName: any valid path segment.
func validateRBACName(name string, _ bool) []string { return path.IsValidPathSegmentName(name) }

func validateRole(r *rbacv1.Role) field.ErrorList {
	errs := validateObjectMeta(&r.ObjectMeta, true, validateRBACName, metaPath)
	for i, rule := range r.Rules {
		errs = append(errs, validatePolicyRule(rule, true, field.NewPath("rules").Index(i))...)
	}
	return errs
}

func validateClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	errs := validateObjectMeta(&r.ObjectMeta, false, validateRBACName, metaPath)
	for i, rule := range r.Rules {
		errs = append(errs, validatePolicyRule(rule, false, field.NewPath("rules").Index(i))...)
	}
	if r.AggregationRule != nil {
		p := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(r.AggregationRule.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range r.AggregationRule.ClusterRoleSelectors {
			sel := &r.AggregationRule.ClusterRoleSelectors[i]
			errs = append(errs, metavalidation.ValidateLabelSelector(sel, metavalidation.LabelSelectorValidationOptions{}, p.Index(i))...)
			if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
				errs = append(errs, field.Invalid(p.Index(i), sel, "invalid label selector."))
			}
		}
	}
	return errs
}

// validatePolicyRule is ValidatePolicyRule.
func validatePolicyRule(rule rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Verbs) == 0 {
		errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

func validateRoleBinding(b *rbacv1.RoleBinding) field.ErrorList {
	errs := validateObjectMeta(&b.ObjectMeta, true, validateRBACName, metaPath)
	errs = append(errs, validateRoleRef(b.RoleRef, []string{"Role", "ClusterRole"})...)
	for i, s := range b.Subjects {
		errs = append(errs, validateSubject(s, true, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

func validateRoleBindingUpdate(b, old *rbacv1.RoleBinding) field.ErrorList {
	errs := validateRoleBinding(b)
	if b.RoleRef != old.RoleRef {
		errs = append(errs, field.Invalid(field.NewPath("roleRef"), b.RoleRef, "cannot change roleRef"))
	}
	return errs
}

func validateClusterRoleBinding(b *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := validateObjectMeta(&b.ObjectMeta, false, validateRBACName, metaPath)
	errs = append(errs, validateRoleRef(b.RoleRef, []string{"ClusterRole"})...)
	for i, s := range b.Subjects {
		errs = append(errs, validateSubject(s, false, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

func validateClusterRoleBindingUpdate(b, old *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := validateClusterRoleBinding(b)
	if b.RoleRef != old.RoleRef {
		errs = append(errs, field.Invalid(field.NewPath("roleRef"), b.RoleRef, "cannot change roleRef"))
	}
	return errs
}

func validateRoleRef(ref rbacv1.RoleRef, kinds []string) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(p.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	if !slices.Contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(p.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range validateRBACName(ref.Name, false) {
			errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

// validateSubject is ValidateRoleBindingSubject.
func validateSubject(s rbacv1.Subject, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range apivalidation.NameIsDNSSubdomain(s.Name, false) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}

// Tables: kube's printers for roles (NAME, CREATED AT) and bindings (NAME,
// ROLE, AGE, and USERS, GROUPS, SERVICEACCOUNTS with -o wide).

func roleTable[T Object]() *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
	return tableOf(cols, func(r T) []any {
		return []any{r.GetName(), r.GetCreationTimestamp().UTC().Format(time.RFC3339)}
	})
}

func bindingTable[T Object](now func() time.Time, parts func(T) (metav1.ObjectMeta, rbacv1.RoleRef, []rbacv1.Subject)) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Role", Type: "string", Description: rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]},
		ageColumn,
		{Name: "Users", Type: "string", Priority: 1, Description: "Users in the roleBinding"},
		{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the roleBinding"},
		{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the roleBinding"},
	}
	return tableOf(cols, func(b T) []any {
		meta, ref, subjects := parts(b)
		users, groups, sas := subjectStrings(subjects)
		return []any{meta.Name, ref.Kind + "/" + ref.Name, since(now, meta.CreationTimestamp),
			strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
	})
}

// subjectStrings is kube's rbac.SubjectsStrings.
func subjectStrings(subjects []rbacv1.Subject) (users, groups, sas []string) {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+":"+s.Name)
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		}
	}
	return users, groups, sas
}
