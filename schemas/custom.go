package schemas

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// Custom is what the apiserver needs to know of a custom resource beyond
// the strategy funcs of its Resource: objects are
// *unstructured.Unstructured, built by package schemas/custom from a
// CustomResourceDefinition. A Custom is immutable: a changed definition
// gets new Resources.
type Custom struct {
	// CRD is the definition the resource was built from; it must not be
	// modified.
	CRD *apiextensionsv1.CustomResourceDefinition
	// StorageVersion is the version objects are stored in (the one
	// marked storage: true); with conversion None an object read in
	// another version only changes its apiVersion.
	StorageVersion string
	// Warning is the deprecation warning of a deprecated version, sent as
	// a Warning header on every request; "" if not deprecated.
	Warning string
	// Terminating: the definition is being deleted, and creates are
	// refused (405), as kube refuses them.
	Terminating bool
	// Scale reads and writes the scale subresource; nil when the version
	// has none.
	Scale *CustomScale
	// TypeConverter is the structured-merge-diff schema of the kind, for
	// server-side apply.
	TypeConverter managedfields.TypeConverter
	// Converter converts objects between the definition's versions, as
	// its spec.conversion says: None (only apiVersion changes) or a
	// ConversionReview sent to its webhook. Reads convert from the stored
	// version, writes to it.
	Converter runtime.ObjectConvertor
	// OpenAPIV2 and OpenAPIV3 are the version's documents as kube's
	// OpenAPI controllers build them (a Swagger 2.0 document and an
	// OpenAPI 3.0 document, JSON), merged into the served ones.
	OpenAPIV2, OpenAPIV3 []byte
}

// CustomScale is a version's scale subresource.
type CustomScale struct {
	// Of renders the Scale of an object.
	Of func(obj Object) (*autoscalingv1.Scale, error)
	// SetReplicas writes spec replicas into an object.
	SetReplicas func(obj Object, replicas int32) error
}

// StorageGVK is the GroupVersionKind objects of r are stored as: r's own,
// or, for a custom resource, its kind in the storage version.
func (r *Resource) StorageGVK() schema.GroupVersionKind {
	if r.Custom != nil && r.Custom.StorageVersion != "" {
		return schema.GroupVersionKind{Group: r.GroupVersion.Group, Version: r.Custom.StorageVersion, Kind: r.Kind}
	}
	return r.GVK()
}
