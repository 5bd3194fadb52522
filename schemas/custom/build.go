package custom

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/util/webhook"

	"github.com/cairn-dev/cairn/schemas"
)

// Build returns the resources crd serves: one per served version, in the
// order of spec.versions, named by status.acceptedNames (which the naming
// controller fills in). A definition whose names are not accepted yet
// serves nothing. conv makes the definition's converter (kube's factory,
// whose webhook client reaches conversion webhooks; NewConverters). The
// error means the definition cannot be served: validation should have
// refused it, or its conversion webhook's client cannot be built (a
// caBundle that is not PEM, which kube lets a definition keep until it is
// established).
func Build(crd *apiextensionsv1.CustomResourceDefinition, conv *conversion.CRConverterFactory) ([]*schemas.Resource, error) {
	names := crd.Status.AcceptedNames
	if names.Plural == "" || names.Kind == "" {
		return nil, nil
	}
	storage, err := apihelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return nil, fmt.Errorf("custom: %s: %w", crd.Name, err)
	}
	terminating := apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating)
	converter, _, err := conv.NewConverter(crd)
	if err != nil {
		return nil, fmt.Errorf("custom: %s: converter: %w", crd.Name, err)
	}
	var out []*schemas.Resource
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		res, err := buildVersion(crd, v, storage, terminating)
		if err != nil {
			return nil, fmt.Errorf("custom: %s version %s: %w", crd.Name, v.Name, err)
		}
		res.Custom.Converter = converter
		out = append(out, res)
	}
	return out, nil
}

// NewConverters is kube's converter factory with the resolvers its
// webhook client uses (kube-apiserver passes apiextensions-apiserver the
// aggregator's service resolver and its egress-selector wrapper): a
// service reference is resolved by services and dialed as wrap's
// resolver says. A nil services resolves a service reference to its
// cluster DNS name (kube's default resolver); a nil wrap uses kube's
// default client configuration.
func NewConverters(services webhook.ServiceResolver, wrap webhook.AuthenticationInfoResolverWrapper) (*conversion.CRConverterFactory, error) {
	if services == nil {
		services = webhook.NewDefaultServiceResolver()
	}
	f, err := conversion.NewCRConverterFactory(services, wrap)
	if err != nil {
		return nil, fmt.Errorf("custom: converter factory: %w", err)
	}
	return f, nil
}

// version is what one served version needs at request time.
type served struct {
	crd        *apiextensionsv1.CustomResourceDefinition
	gvk        schema.GroupVersionKind
	namespaced bool
	structural *structuralschema.Structural
	strategy   strategy
	status     statusStrategy
}

// strategy and statusStrategy are the methods of kube's (unexported)
// custom resource strategies that cairn calls.
type strategy interface {
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
	GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error)
}

type statusStrategy interface {
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

func buildVersion(crd *apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion, storage string, terminating bool) (*schemas.Resource, error) {
	names := crd.Status.AcceptedNames
	gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
	ver := &served{crd: crd, gvk: gv.WithKind(names.Kind), namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped}

	// The schema: internal form for the validators, structural form
	// (defaults pruned of unknown fields, as kube serves them) for
	// pruning, defaulting, list types and CEL.
	val, err := apihelpers.GetSchemaForVersion(crd, v.Name)
	if err != nil {
		return nil, err
	}
	var props *apiextensions.JSONSchemaProps
	if val != nil {
		in := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, in, nil); err != nil {
			return nil, fmt.Errorf("convert schema: %w", err)
		}
		props = in.OpenAPIV3Schema
		s, err := structuralschema.NewStructural(props)
		if err != nil && !crd.Spec.PreserveUnknownFields {
			return nil, fmt.Errorf("structural schema: %w", err)
		}
		if s != nil && !crd.Spec.PreserveUnknownFields {
			s = s.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(s); err != nil {
				return nil, fmt.Errorf("prune defaults: %w", err)
			}
		}
		ver.structural = s
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, fmt.Errorf("schema validator: %w", err)
	}
	subs, err := apihelpers.GetSubresourcesForVersion(crd, v.Name)
	if err != nil {
		return nil, err
	}
	var statusSpec *apiextensions.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	var scaleSpec *apiextensions.CustomResourceSubresourceScale
	var subresources []string
	if subs != nil && subs.Status != nil {
		subresources = append(subresources, "status")
		statusSpec = &apiextensions.CustomResourceSubresourceStatus{}
		if props != nil {
			if st, ok := props.Properties["status"]; ok {
				if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
					return nil, fmt.Errorf("status validator: %w", err)
				}
			}
		}
	}
	if subs != nil && subs.Scale != nil {
		subresources = append(subresources, "scale")
		scaleSpec = &apiextensions.CustomResourceSubresourceScale{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(subs.Scale, scaleSpec, nil); err != nil {
			return nil, fmt.Errorf("convert scale: %w", err)
		}
	}
	st := customresource.NewStrategy(unstructuredscheme.NewUnstructuredObjectTyper(), ver.namespaced, ver.gvk,
		validator, statusValidator, ver.structural, statusSpec, scaleSpec, v.SelectableFields)
	ver.strategy = st
	ver.status = customresource.NewStatusStrategy(st)

	table, err := newTable(crd, v.Name)
	if err != nil {
		return nil, err
	}
	info := &schemas.Custom{CRD: crd, StorageVersion: storage, Terminating: terminating}
	if v.Deprecated {
		info.Warning = deprecationWarning(v, crd.Spec)
	}
	if subs != nil && subs.Scale != nil {
		info.Scale = scaleFor(subs.Scale)
	}
	v2, v3, tc, err := openAPIFor(crd, v.Name)
	if err != nil {
		return nil, err
	}
	info.OpenAPIV2, info.OpenAPIV3, info.TypeConverter = v2, v3, tc

	ctx := context.Background()
	listGVK := gv.WithKind(names.ListKind)
	return &schemas.Resource{
		GroupVersion: gv, Kind: names.Kind, Plural: names.Plural, Singular: names.Singular,
		ShortNames: names.ShortNames, Categories: names.Categories, Namespaced: ver.namespaced,
		Subresources: subresources,
		New: func() schemas.Object {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(ver.gvk)
			return u
		},
		NewList: func() runtime.Object {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(listGVK)
			return l
		},
		Default:          func(o schemas.Object) { ver.coerce(o.(*unstructured.Unstructured)) },
		PrepareForCreate: func(o schemas.Object) { st.PrepareForCreate(ctx, o) },
		PrepareForUpdate: func(o, old schemas.Object) { st.PrepareForUpdate(ctx, o, old) },
		PrepareForStatusUpdate: func(o, old schemas.Object) {
			ver.status.PrepareForUpdate(ctx, o, old)
		},
		// kube's rest.BeforeCreate and BeforeUpdate: the strategy first,
		// then, if that passed, the generic object-meta checks.
		ValidateCreate: func(o schemas.Object) field.ErrorList {
			if errs := st.Validate(ctx, o); len(errs) > 0 {
				return errs
			}
			return apivalidation.ValidateObjectMetaAccessor(o, ver.namespaced, path.ValidatePathSegmentName, field.NewPath("metadata"))
		},
		ValidateUpdate: func(o, old schemas.Object) field.ErrorList {
			return ver.updateErrors(o, old, st.ValidateUpdate(ctx, o, old))
		},
		ValidateStatusUpdate: func(o, old schemas.Object) field.ErrorList {
			return ver.updateErrors(o, old, ver.status.ValidateUpdate(ctx, o, old))
		},
		// metadata.name, metadata.namespace and the version's
		// selectableFields, as kube's strategy computes them.
		Fields: func(o schemas.Object) fields.Set {
			if _, set, err := st.GetAttrs(o); err == nil {
				return set
			}
			set := fields.Set{"metadata.name": o.GetName()}
			if ver.namespaced {
				set["metadata.namespace"] = o.GetNamespace()
			}
			return set
		},
		Table:  table,
		Custom: info,
	}, nil
}

// updateErrors is kube's rest.BeforeUpdate: the common object-meta checks,
// then the strategy's.
func (ver *served) updateErrors(o, old schemas.Object, strategyErrs field.ErrorList) field.ErrorList {
	metaPath := field.NewPath("metadata")
	errs := apivalidation.ValidateObjectMetaAccessor(o, ver.namespaced, path.ValidatePathSegmentName, metaPath)
	errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(o, old, metaPath)...)
	return append(errs, strategyErrs...)
}

// coerce is what kube's decoder does to a custom object on its way in:
// default from the schema, prune unknown fields and nulls where the
// schema does not allow them, and coerce the object meta.
func (ver *served) coerce(u *unstructured.Unstructured) {
	s := ver.structural
	if s == nil || ver.crd.Spec.PreserveUnknownFields {
		return
	}
	gv := u.GetAPIVersion()
	kind := u.GetKind()
	meta, found, _, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{})
	if err != nil {
		return
	}
	structuraldefaulting.Default(u.Object, s)
	structuralpruning.PruneWithOptions(u.Object, s, true, structuralschema.UnknownFieldPathOptions{})
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s)
	_, _ = schemaobjectmeta.CoerceWithOptions(nil, u.Object, s, false, schemaobjectmeta.CoerceOptions{})
	u.SetKind(kind)
	u.SetAPIVersion(gv)
	if found {
		_ = schemaobjectmeta.SetObjectMeta(u.Object, meta)
	}
}

// deprecationWarning is kube's defaultDeprecationWarning, or the
// version's own deprecationWarning.
func deprecationWarning(v apiextensionsv1.CustomResourceDefinitionVersion, spec apiextensionsv1.CustomResourceDefinitionSpec) string {
	if v.DeprecationWarning != nil {
		return *v.DeprecationWarning
	}
	msg := fmt.Sprintf("%s/%s %s is deprecated", spec.Group, v.Name, spec.Names.Kind)
	var newer []string
	for _, o := range spec.Versions {
		if o.Served && !o.Deprecated && version.CompareKubeAwareVersionStrings(v.Name, o.Name) < 0 {
			newer = append(newer, o.Name)
		}
	}
	if len(newer) == 0 {
		return msg
	}
	sort.Slice(newer, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(newer[i], newer[j]) > 0 })
	return msg + fmt.Sprintf("; use %s/%s %s", spec.Group, newer[0], spec.Names.Kind)
}

// openAPIFor builds the version's OpenAPI v2 and v3 documents (as kube's
// openapi controllers publish them) and the type converter server-side
// apply merges with. A schema the builder cannot model gets the deduced
// converter, as in kube.
func openAPIFor(crd *apiextensionsv1.CustomResourceDefinition, ver string) (v2, v3 []byte, tc managedfields.TypeConverter, err error) {
	sw, err := builder.BuildOpenAPIV2(crd, ver, builder.Options{V2: true, IncludeSelectableFields: true})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("openapi v2: %w", err)
	}
	if v2, err = json.Marshal(sw); err != nil {
		return nil, nil, nil, fmt.Errorf("openapi v2: %w", err)
	}
	doc, err := builder.BuildOpenAPIV3(crd, ver, builder.Options{V2: false, IncludeSelectableFields: true})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("openapi v3: %w", err)
	}
	if v3, err = json.Marshal(doc); err != nil {
		return nil, nil, nil, fmt.Errorf("openapi v3: %w", err)
	}
	tc = managedfields.NewDeducedTypeConverter()
	if doc.Components != nil && len(doc.Components.Schemas) > 0 {
		if t, err := managedfields.NewTypeConverter(doc.Components.Schemas, crd.Spec.PreserveUnknownFields); err == nil {
			tc = t
		}
	}
	return v2, v3, tc, nil
}
