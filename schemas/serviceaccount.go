package schemas

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// core/v1 ServiceAccounts, as kube's pkg/registry/core/serviceaccount
// serves them: no defaults, ValidateServiceAccount (a DNS-subdomain name,
// the usual metadata) and the printer's NAME SECRETS AGE. Their token
// subresource (TokenRequest) is the apiserver's.

func serviceAccountResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCore, Kind: "ServiceAccount", Plural: "serviceaccounts", Singular: "serviceaccount",
		ShortNames: []string{"sa"}, Namespaced: true,
		Subresources:     []string{"token"},
		New:              func() Object { return &corev1.ServiceAccount{} },
		NewList:          func() runtime.Object { return &corev1.ServiceAccountList{} },
		Default:          defaulter(prepareNothing[*corev1.ServiceAccount]),
		PrepareForCreate: defaulter(prepareNothing[*corev1.ServiceAccount]),
		PrepareForUpdate: preparer(prepareKeepGeneration[*corev1.ServiceAccount]),
		ValidateCreate:   createValidator(true, validateServiceAccount),
		ValidateUpdate:   updateValidator(true, validateServiceAccountUpdate),
		Fields:           fieldser[*corev1.ServiceAccount](true, nil),
		Table:            serviceAccountTable(now),
	}
}

// validateServiceAccount is kube's ValidateServiceAccount.
func validateServiceAccount(sa *corev1.ServiceAccount) field.ErrorList {
	return validateObjectMeta(&sa.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
}

// validateServiceAccountUpdate is kube's ValidateServiceAccountUpdate.
func validateServiceAccountUpdate(sa, old *corev1.ServiceAccount) field.ErrorList {
	errs := validateObjectMetaUpdate(&sa.ObjectMeta, &old.ObjectMeta, metaPath)
	return append(errs, validateServiceAccount(sa)...)
}

func serviceAccountTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Secrets", Type: "string", Description: corev1.ServiceAccount{}.SwaggerDoc()["secrets"]},
		ageColumn,
	}
	return tableOf(cols, func(sa *corev1.ServiceAccount) []any {
		return []any{sa.Name, int64(len(sa.Secrets)), since(now, sa.CreationTimestamp)}
	})
}
