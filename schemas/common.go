package schemas

import (
	"slices"
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The adapters below turn typed funcs into the Object-typed funcs of
// Resource. They panic on a wrong type, which is a programming error in the
// caller (the apiserver always passes the Resource's own type).

func defaulter[T Object](f func(T)) func(Object) {
	return func(o Object) { f(o.(T)) }
}

func preparer[T Object](f func(obj, old T)) func(Object, Object) {
	return func(o, old Object) { f(o.(T), old.(T)) }
}

func createValidator[T Object](namespaced bool, f func(T) field.ErrorList) func(Object) field.ErrorList {
	return func(o Object) field.ErrorList {
		// kube's rest.BeforeCreate runs the strategy's validation and, only
		// if that passed, the generic object-meta checks.
		if errs := f(o.(T)); len(errs) > 0 {
			return errs
		}
		return apivalidation.ValidateObjectMetaAccessor(o, namespaced, path.ValidatePathSegmentName, field.NewPath("metadata"))
	}
}

func updateValidator[T Object](namespaced bool, f func(obj, old T) field.ErrorList) func(Object, Object) field.ErrorList {
	return func(o, old Object) field.ErrorList {
		return commonUpdateErrors(namespaced, o, old, f(o.(T), old.(T)))
	}
}

// commonUpdateErrors is what kube's rest.BeforeUpdate does: validate the
// common object-meta fields first and append the strategy's errors.
func commonUpdateErrors(namespaced bool, o, old Object, strategyErrs field.ErrorList) field.ErrorList {
	metaPath := field.NewPath("metadata")
	errs := apivalidation.ValidateObjectMetaAccessor(o, namespaced, path.ValidatePathSegmentName, metaPath)
	errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(o, old, metaPath)...)
	errs = append(errs, strategyErrs...)
	return dedupe(errs)
}

func fieldser[T Object](namespaced bool, f func(T) fields.Set) func(Object) fields.Set {
	return func(o Object) fields.Set {
		set := objectMetaFields(o, namespaced)
		if f != nil {
			for k, v := range f(o.(T)) {
				set[k] = v
			}
		}
		return set
	}
}

// objectMetaFields is generic.ObjectMetaFieldsSet: metadata.name, and
// metadata.namespace for namespaced kinds.
func objectMetaFields(o metav1.Object, namespaced bool) fields.Set {
	set := fields.Set{"metadata.name": o.GetName()}
	if namespaced {
		set["metadata.namespace"] = o.GetNamespace()
	}
	return set
}

// dedupe drops repeated errors (same type, field and detail) that running
// the generic and the kind's metadata checks can both report.
func dedupe(errs field.ErrorList) field.ErrorList {
	type key struct {
		t      field.ErrorType
		f, det string
	}
	seen := map[key]bool{}
	out := errs[:0:0]
	for _, e := range errs {
		k := key{e.Type, e.Field, e.Detail}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, e)
	}
	return out
}

// sortedKeys returns the keys of m in order, so errors about map entries
// come out in a stable order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Table helpers.

// table is the TableConvertor of every kind: fixed columns and a row func.
type table struct {
	cols []metav1.TableColumnDefinition
	row  func(Object) []any
}

func (t *table) Columns() []metav1.TableColumnDefinition {
	return slices.Clone(t.cols)
}

func (t *table) Row(obj Object) []any { return t.row(obj) }

func tableOf[T Object](cols []metav1.TableColumnDefinition, row func(T) []any) *table {
	return &table{cols: cols, row: func(o Object) []any { return row(o.(T)) }}
}

var (
	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
	ageColumn  = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}
)

// since is translateTimestampSince of kube's printers.
func since(now func() time.Time, t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}

// sinceMicro is translateMicroTimestampSince.
func sinceMicro(now func() time.Time, t metav1.MicroTime) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}
