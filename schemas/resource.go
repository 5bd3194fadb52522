package schemas

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Object is what every served kind is: a runtime.Object with ObjectMeta.
type Object interface {
	runtime.Object
	metav1.Object
}

// Resource describes one served resource: its names, its Go type, and the
// strategy the apiserver applies to it (defaulting, validation, field
// attributes for selectors, the Table it prints as).
//
// All funcs must be safe for concurrent use and must not do I/O.
type Resource struct {
	GroupVersion schema.GroupVersion
	Kind         string
	// Plural is the resource name in URLs ("pods").
	Plural     string
	Singular   string
	ShortNames []string
	Categories []string
	Namespaced bool
	// Subresources served besides the main resource: "status", "scale",
	// "binding".
	Subresources []string
	// Verbs the resource serves, as discovery lists them; nil means every
	// verb of a stored resource.
	Verbs []string
	// OrphanByDefault is kube's DefaultGarbageCollectionPolicy
	// OrphanDependents: a delete that names no propagation policy (and
	// finds no GC finalizer on the object) orphans the dependents, as
	// batch/v1 Jobs do for backward compatibility. Otherwise the default is
	// Background.
	OrphanByDefault bool

	New     func() Object
	NewList func() runtime.Object

	// Default fills defaults in place (Kubernetes' SetObjectDefaults_*).
	// It runs on create and update, after decoding and before validation.
	Default func(obj Object)
	// PrepareForCreate clears fields a client may not set on create (status
	// for most kinds) and sets generation to 1.
	PrepareForCreate func(obj Object)
	// PrepareForUpdate keeps what an update of the main resource may not
	// change (status) from old, and bumps generation when the spec changed.
	PrepareForUpdate func(obj, old Object)
	// PrepareForStatusUpdate keeps everything but status (and
	// metadata labels/annotations as kube does) from old.
	PrepareForStatusUpdate func(obj, old Object)
	// SetRequestor, if set, runs after PrepareForCreate with the user the
	// request authenticated as (a CSR's spec.username and groups, as kube's
	// strategy takes them from the request context).
	SetRequestor func(obj Object, user string, groups []string)
	// SubresourceUpdates are the strategies of subresources other than
	// status that update the object (a CSR's approval), by name.
	SubresourceUpdates map[string]SubresourceUpdate
	// ValidateCreate and ValidateUpdate return the field errors Kubernetes
	// returns for the kind; an empty list means valid.
	ValidateCreate func(obj Object) field.ErrorList
	ValidateUpdate func(obj, old Object) field.ErrorList
	// ValidateStatusUpdate, if set, is all ValidateStatus runs (kinds
	// whose strategy comes whole from elsewhere: CRDs and custom
	// resources).
	ValidateStatusUpdate func(obj, old Object) field.ErrorList
	// Fields returns the field-selector attributes of an object
	// (metadata.name, metadata.namespace and the kind's own).
	Fields func(obj Object) fields.Set
	// Table renders objects as the rows kubectl get prints.
	Table TableConvertor
	// Custom is set on the resources a CustomResourceDefinition defines
	// (custom.go); nil for built-in kinds.
	Custom *Custom
}

// GroupVersionKind of the resource.
func (r *Resource) GVK() schema.GroupVersionKind { return r.GroupVersion.WithKind(r.Kind) }

// GVR of the resource.
func (r *Resource) GVR() schema.GroupVersionResource {
	return r.GroupVersion.WithResource(r.Plural)
}

// HasSubresource reports whether sub is served.
func (r *Resource) HasSubresource(sub string) bool {
	for _, s := range r.Subresources {
		if s == sub {
			return true
		}
	}
	return false
}

// TableConvertor renders objects as a metav1.Table. wide adds the columns
// `kubectl get -o wide` shows (columns with Priority > 0).
type TableConvertor interface {
	// Columns are the column definitions, including the priority-1 ones.
	Columns() []metav1.TableColumnDefinition
	// Row is the cells of one object's row, one per column.
	Row(obj Object) []any
}

// GroupResource of the resource, as API errors name it.
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Plural}
}

// AllowCreateOnUpdate reports whether PUT of a missing object creates it
// (true for the kinds kube allows it on: events and leases).
func (r *Resource) AllowCreateOnUpdate() bool {
	return r.Plural == "events" || r.Plural == "leases"
}

// ValidateStatus returns the errors kube's status strategy returns for an
// update of the status subresource (after PrepareForStatusUpdate), plus the
// common object-meta checks every update gets. For a kind without a status
// subresource it falls back to ValidateUpdate.
func (r *Resource) ValidateStatus(obj, old Object) field.ErrorList {
	if r.ValidateStatusUpdate != nil {
		return r.ValidateStatusUpdate(obj, old)
	}
	errs, ok := validateStatusUpdate(obj, old)
	if !ok {
		return r.ValidateUpdate(obj, old)
	}
	return commonUpdateErrors(r.Namespaced, obj, old, errs)
}
