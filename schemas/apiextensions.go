package schemas

import (
	"context"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// apiextensions.k8s.io/v1 CustomResourceDefinitions. The strategy is
// kube's (k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition),
// ported rather than linked: that package brings kube's generic registry
// and with it the etcd client, which no consumer of the log may link
// (ops/layers). Each call converts the v1 object to the internal
// apiextensions type, runs the strategy's PrepareForCreate,
// PrepareForUpdate and kube's own validation package
// (ValidateCustomResourceDefinition: names, versions, structural schemas,
// CEL rules, printer columns, subresources), and converts back. Serving
// the kinds a definition defines is package schemas/custom's, and the
// apiserver's CRD controllers' (status conditions, the cleanup finalizer).

// CustomResourceCleanupFinalizer is the finalizer a deleted CRD keeps
// until its objects are gone.
const CustomResourceCleanupFinalizer = apiextensionsv1.CustomResourceCleanupFinalizer

// crdScheme knows the internal and v1 apiextensions types, their
// conversions and defaults.
var crdScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	apiextensionsinstall.Install(s)
	return s
}()

// crdPrepareForCreate is kube's strategy.PrepareForCreate: no status but
// the storage version as stored, generation 1. Its dropDisabledFields
// drops nothing with kube 1.37's default gates (CRDValidationRatcheting
// and CustomResourceFieldSelectors are GA, CRDObservedGenerationTracking
// is on by default).
func crdPrepareForCreate(crd *apiextensions.CustomResourceDefinition) {
	crd.Status = apiextensions.CustomResourceDefinitionStatus{}
	crd.Generation = 1
	addStoredVersion(crd)
}

// crdPrepareForUpdate is kube's strategy.PrepareForUpdate: status is the
// old one, a changed spec moves the generation, a new storage version is
// added to the stored ones.
func crdPrepareForUpdate(crd, old *apiextensions.CustomResourceDefinition) {
	crd.Status = old.Status
	if !apiequality.Semantic.DeepEqual(old.Spec, crd.Spec) {
		crd.Generation = old.Generation + 1
	}
	addStoredVersion(crd)
}

func addStoredVersion(crd *apiextensions.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			if !apiextensions.IsStoredVersion(crd, v.Name) {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
			break
		}
	}
}

// crdPrepareForStatusUpdate is kube's statusStrategy.PrepareForUpdate:
// the spec is the old one. (kube 1.37 calls ResetObjectMetaForStatus with
// the new object's metadata as both arguments, which changes nothing; the
// metadata is left as kube leaves it.)
func crdPrepareForStatusUpdate(crd, old *apiextensions.CustomResourceDefinition) {
	crd.Spec = old.Spec
}

// toInternalCRD converts a v1 CRD to the internal type kube's strategy
// works on.
func toInternalCRD(crd *apiextensionsv1.CustomResourceDefinition) *apiextensions.CustomResourceDefinition {
	out := &apiextensions.CustomResourceDefinition{}
	if err := crdScheme.Convert(crd, out, nil); err != nil {
		// Conversion of a decoded v1 object cannot fail: every v1 field has
		// an internal one.
		panic("schemas: convert CRD to internal: " + err.Error())
	}
	return out
}

// fromInternalCRD writes an internal CRD back into crd.
func fromInternalCRD(in *apiextensions.CustomResourceDefinition, crd *apiextensionsv1.CustomResourceDefinition) {
	out := &apiextensionsv1.CustomResourceDefinition{}
	if err := crdScheme.Convert(in, out, nil); err != nil {
		panic("schemas: convert CRD from internal: " + err.Error())
	}
	out.TypeMeta = crd.TypeMeta
	*crd = *out
}

func customResourceDefinitionResource(now func() time.Time) *Resource {
	ctx := context.Background()
	return &Resource{
		GroupVersion: gvAPIExtensions, Kind: "CustomResourceDefinition", Plural: "customresourcedefinitions",
		Singular: "customresourcedefinition", ShortNames: []string{"crd", "crds"}, Categories: []string{"api-extensions"},
		Subresources: []string{"status"},
		New:          func() Object { return &apiextensionsv1.CustomResourceDefinition{} },
		NewList:      func() runtime.Object { return &apiextensionsv1.CustomResourceDefinitionList{} },
		Default:      defaulter(func(crd *apiextensionsv1.CustomResourceDefinition) { crdScheme.Default(crd) }),
		PrepareForCreate: defaulter(func(crd *apiextensionsv1.CustomResourceDefinition) {
			in := toInternalCRD(crd)
			crdPrepareForCreate(in)
			fromInternalCRD(in, crd)
		}),
		PrepareForUpdate: preparer(func(crd, old *apiextensionsv1.CustomResourceDefinition) {
			in := toInternalCRD(crd)
			crdPrepareForUpdate(in, toInternalCRD(old))
			fromInternalCRD(in, crd)
		}),
		PrepareForStatusUpdate: preparer(func(crd, old *apiextensionsv1.CustomResourceDefinition) {
			in := toInternalCRD(crd)
			crdPrepareForStatusUpdate(in, toInternalCRD(old))
			fromInternalCRD(in, crd)
		}),
		// kube's CRD validation covers the object meta itself.
		ValidateCreate: func(o Object) field.ErrorList {
			return crdvalidation.ValidateCustomResourceDefinition(ctx, toInternalCRD(o.(*apiextensionsv1.CustomResourceDefinition)))
		},
		ValidateUpdate: func(o, old Object) field.ErrorList {
			return crdvalidation.ValidateCustomResourceDefinitionUpdate(ctx, toInternalCRD(o.(*apiextensionsv1.CustomResourceDefinition)),
				toInternalCRD(old.(*apiextensionsv1.CustomResourceDefinition)))
		},
		ValidateStatusUpdate: func(o, old Object) field.ErrorList {
			return crdvalidation.ValidateUpdateCustomResourceDefinitionStatus(ctx, toInternalCRD(o.(*apiextensionsv1.CustomResourceDefinition)),
				toInternalCRD(old.(*apiextensionsv1.CustomResourceDefinition)))
		},
		Fields: fieldser[*apiextensionsv1.CustomResourceDefinition](false, nil),
		Table:  crdTable(),
	}
}

// crdTable is the CRD table of kube 1.32, whose version cairn reports
// (registry/customresourcedefinition/tableconvertor): name and creation
// time.
func crdTable() *table {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Created At", Type: "date", Description: meta["creationTimestamp"]},
	}
	return tableOf(cols, func(crd *apiextensionsv1.CustomResourceDefinition) []any {
		return []any{crd.Name, crd.CreationTimestamp.UTC().Format(time.RFC3339)}
	})
}
