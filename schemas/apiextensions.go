package schemas

import (
	"context"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdstrategy "k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// apiextensions.k8s.io/v1 CustomResourceDefinitions. The strategy is
// kube's own (k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition):
// each call converts the v1 object to the internal apiextensions type,
// runs kube's PrepareForCreate, PrepareForUpdate and validation
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

var (
	crdMain   = crdstrategy.NewStrategy(crdScheme)
	crdStatus = crdstrategy.NewStatusStrategy(crdScheme)
)

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
			crdMain.PrepareForCreate(ctx, in)
			fromInternalCRD(in, crd)
		}),
		PrepareForUpdate: preparer(func(crd, old *apiextensionsv1.CustomResourceDefinition) {
			in := toInternalCRD(crd)
			crdMain.PrepareForUpdate(ctx, in, toInternalCRD(old))
			fromInternalCRD(in, crd)
		}),
		PrepareForStatusUpdate: preparer(func(crd, old *apiextensionsv1.CustomResourceDefinition) {
			in := toInternalCRD(crd)
			crdStatus.PrepareForUpdate(ctx, in, toInternalCRD(old))
			fromInternalCRD(in, crd)
		}),
		// kube's CRD validation covers the object meta itself.
		ValidateCreate: func(o Object) field.ErrorList {
			return crdMain.Validate(ctx, toInternalCRD(o.(*apiextensionsv1.CustomResourceDefinition)))
		},
		ValidateUpdate: func(o, old Object) field.ErrorList {
			return crdMain.ValidateUpdate(ctx, toInternalCRD(o.(*apiextensionsv1.CustomResourceDefinition)),
				toInternalCRD(old.(*apiextensionsv1.CustomResourceDefinition)))
		},
		ValidateStatusUpdate: func(o, old Object) field.ErrorList {
			return crdStatus.ValidateUpdate(ctx, toInternalCRD(o.(*apiextensionsv1.CustomResourceDefinition)),
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
