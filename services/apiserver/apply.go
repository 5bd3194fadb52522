package apiserver

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn/schemas"
)

// Server-side apply (PATCH with Content-Type application/apply-patch+yaml,
// what `kubectl apply --server-side` and client-go's Apply send) merges the
// applied configuration into the live object with structured-merge-diff,
// as kube-apiserver does: each field manager owns the fields it applied,
// recorded in metadata.managedFields; applying a field another manager
// owns with another value is a 409 Conflict listing the conflicts, unless
// force=true takes it over; a field a manager applied before and leaves
// out now is removed (if nobody else owns it). The schema of the built-in
// kinds (list and map types, keys) is client-go's.
//
// Unlike kube-apiserver, cairn tracks managed fields only on objects that
// have been applied: creates and updates of an object without
// managedFields leave it without (they cost a typed conversion of the
// whole object on every write); once an object has been applied, every
// later write records its manager (the fieldManager parameter, or the
// client's user agent up to its first '/'). A field set by such an
// untracked write and then applied with another value is taken over by
// the applier without a conflict.

const applyPatchType = "application/apply-patch+yaml"

// fieldManagers builds one managedfields.FieldManager per kind and
// subresource, on first use.
type fieldManagers struct {
	once sync.Once
	tc   managedfields.TypeConverter
	err  error

	mu sync.Mutex
	m  map[fieldManagerKey]*managedfields.FieldManager
}

type fieldManagerKey struct {
	gvk         schema.GroupVersionKind
	subresource string
	// custom tells the definitions of a custom kind apart: a changed
	// definition gets a new field manager.
	custom *schemas.Custom
}

// get is the field manager of res's kind for subresource ("" or "status").
func (f *fieldManagers) get(res *schemas.Resource, subresource string) (*managedfields.FieldManager, error) {
	if res.Custom != nil {
		return f.getCustom(res, subresource) // crd.go
	}
	f.once.Do(func() {
		// Parsing the schema of every built-in kind takes a while; only
		// servers that see an apply or an applied object pay for it.
		f.tc = applyconfigurations.NewTypeConverter(scheme.Scheme)
	})
	k := fieldManagerKey{gvk: res.GVK(), subresource: subresource}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm, ok := f.m[k]; ok {
		return fm, nil
	}
	fm, err := managedfields.NewDefaultFieldManager(f.tc, scheme.Scheme, defaulter{res}, scheme.Scheme,
		k.gvk, k.gvk.GroupVersion(), subresource, resetFields(res, subresource))
	if err != nil {
		return nil, fmt.Errorf("apiserver: field manager for %v: %w", k.gvk, err)
	}
	if f.m == nil {
		f.m = map[fieldManagerKey]*managedfields.FieldManager{}
	}
	f.m[k] = fm
	return fm, nil
}

// resetFields are the fields a write through the main resource or the
// status subresource may not change, so an apply does not own them: the
// status of a kind with a status subresource, or everything but the status
// through the subresource (kube's strategies' GetResetFields).
func resetFields(res *schemas.Resource, subresource string) map[fieldpath.APIVersion]fieldpath.Filter {
	if !slices.Contains(res.Subresources, "status") {
		return nil
	}
	v := fieldpath.APIVersion(res.GVK().GroupVersion().String())
	status := fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
	if subresource == "status" {
		return map[fieldpath.APIVersion]fieldpath.Filter{v: fieldpath.NewIncludeMatcherFilter(fieldpath.MakePrefixMatcherOrDie("status"))}
	}
	return map[fieldpath.APIVersion]fieldpath.Filter{v: fieldpath.NewExcludeSetFilter(status)}
}

// defaulter applies a resource's defaults, for the field manager.
type defaulter struct{ res *schemas.Resource }

func (d defaulter) Default(obj runtime.Object) {
	if o, ok := obj.(schemas.Object); ok && d.res.Default != nil {
		d.res.Default(o)
	}
}

// fieldManagerName is who makes a write, for managedFields: the
// fieldManager parameter, or the user agent up to its first '/', as kube.
func fieldManagerName(q *request) string {
	if m := q.r.URL.Query().Get("fieldManager"); m != "" {
		return m
	}
	ua, _, _ := strings.Cut(q.r.UserAgent(), "/")
	if len(ua) > 128 {
		ua = ua[:128]
	}
	return ua
}

// applyOptions checks a PATCH's fieldManager and force parameters: an
// apply needs a manager; force is for applies only.
func applyOptions(q *request, apply bool) (manager string, force bool, err error) {
	query := q.r.URL.Query()
	manager = query.Get("fieldManager")
	force = query.Get("force") == "true"
	var errs field.ErrorList
	switch {
	case apply && manager == "":
		errs = append(errs, field.Required(field.NewPath("fieldManager"), "is required for apply patch"))
	case !apply && query.Has("force"):
		errs = append(errs, field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch"))
	}
	if len(manager) > 128 {
		errs = append(errs, field.TooLong(field.NewPath("fieldManager"), "", 128))
	}
	if len(errs) > 0 {
		return "", false, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	return manager, force, nil
}

// decodeApply reads an apply configuration (YAML or JSON) and checks that
// it names the object of the URL.
func decodeApply(q *request, body []byte) (*unstructured.Unstructured, error) {
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, errBadRequest("error decoding YAML: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, errBadRequest("error decoding apply configuration: %v", err)
	}
	if gvk := u.GroupVersionKind(); gvk != q.res.GVK() {
		return nil, errBadRequest("the apply configuration is a %s, not a %s", gvk, q.res.GVK())
	}
	if u.GetName() != q.info.Name {
		return nil, errBadRequest("the name of the object (%s) does not match the name on the URL (%s)", u.GetName(), q.info.Name)
	}
	if len(u.GetManagedFields()) > 0 {
		return nil, errBadRequest("metadata.managedFields must be nil")
	}
	return u, nil
}

// applyTo merges the apply configuration into cur (nil: the object does
// not exist yet, and the apply creates it).
func (s *Server) applyTo(q *request, cur schemas.Object, applied *unstructured.Unstructured, manager string, force bool) (schemas.Object, error) {
	fm, err := s.fields.get(q.res, q.info.Subresource)
	if err != nil {
		return nil, err
	}
	live := cur
	if live == nil {
		live = q.res.New()
		live.SetName(q.info.Name)
		live.SetNamespace(q.info.Namespace)
		live.GetObjectKind().SetGroupVersionKind(q.res.GVK())
	}
	out, err := fm.Apply(live, applied, manager, force)
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil, err
		}
		return nil, apierrors.NewInvalid(q.res.GVK().GroupKind(), q.info.Name, field.ErrorList{
			field.Invalid(field.NewPath("patch"), nil, err.Error())})
	}
	obj, ok := out.(schemas.Object)
	if !ok {
		return nil, fmt.Errorf("apiserver: apply returned a %T", out)
	}
	return obj, nil
}

// trackUpdate records the manager of a write to an object that has
// managed fields (see above); desired is returned unchanged otherwise,
// without managed fields.
func (s *Server) trackUpdate(q *request, cur, desired schemas.Object) (schemas.Object, error) {
	if len(cur.GetManagedFields()) == 0 {
		desired.SetManagedFields(nil)
		return desired, nil
	}
	fm, err := s.fields.get(q.res, q.info.Subresource)
	if err != nil {
		return nil, err
	}
	out, ok := fm.UpdateNoErrors(cur, desired, fieldManagerName(q)).(schemas.Object)
	if !ok {
		return desired, nil
	}
	return out, nil
}
