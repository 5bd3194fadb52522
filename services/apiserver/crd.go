package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"

	"github.com/google/uuid"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/cairn-dev/cairn/schemas"
)

// Custom resources (the kinds of CustomResourceDefinitions, package
// schemas/custom) take the same request path as built-in kinds; this file
// holds what differs: the deprecation warning, creates refused while the
// definition is terminating, objects decoded as Unstructured, their
// server-side apply schema, and the cleanup finalizer a CRD delete adds.

// serveCustom does what kube's CRD handler does before serving a custom
// resource request; false means it answered already.
func (s *Server) serveCustom(q *request) bool {
	c := q.res.Custom
	if c.Warning != "" {
		q.w.Header().Add("Warning", `299 - `+strconv.Quote(c.Warning))
	}
	if c.Terminating && q.info.Verb == "create" {
		writeStatus(q.w, apierrors.NewMethodNotSupported(q.res.GroupResource(), "create"))
		return false
	}
	return true
}

// errCustomPatchType is kube's answer to a patch type custom resources do
// not take.
func errCustomPatchType(ct string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got %q)", ct), 0, false)
}

// servesGroup reports whether the registry serves the group (and the
// version, if not "").
func (s *Server) servesGroup(group, version string) bool {
	for _, gv := range s.reg.Groups() {
		if gv.Group == group && (version == "" || gv.Version == version) {
			return true
		}
	}
	return false
}

// decodeCustom decodes a custom object; apiVersion and kind are checked
// by the caller.
func decodeCustom(body []byte) (*unstructured.Unstructured, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errBadRequest("the body of the request is not a JSON object")
	}
	var m map[string]any
	if err := jsonUnmarshal(body, &m); err != nil {
		return nil, errBadRequest("error decoding request body: %v", err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// convertCustom converts a custom object to gv with its definition's
// converter (a no-op if it is in gv already).
func convertCustom(res *schemas.Resource, obj schemas.Object, gv schema.GroupVersion) (schemas.Object, error) {
	if obj.GetObjectKind().GroupVersionKind().GroupVersion() == gv || res.Custom.Converter == nil {
		return obj, nil
	}
	out, err := res.Custom.Converter.ConvertToVersion(obj, gv)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	o, ok := out.(schemas.Object)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("conversion to %s returned a %T", gv, out))
	}
	return o, nil
}

// encodeFor encodes obj for etcd in its resource's storage version,
// converting a custom object written in another version.
func encodeFor(res *schemas.Resource, obj schemas.Object) ([]byte, error) {
	gvk := res.StorageGVK()
	if res.Custom != nil && gvk.GroupVersion() != res.GroupVersion {
		stored, err := convertCustom(res, obj.DeepCopyObject().(schemas.Object), gvk.GroupVersion())
		if err != nil {
			return nil, err
		}
		return encodeStored(stored, gvk)
	}
	return encodeStored(obj, gvk)
}

// unstructuredMeta is the ObjectMeta of a custom object.
func unstructuredMeta(u *unstructured.Unstructured) metav1.ObjectMeta {
	var m metav1.ObjectMeta
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(md, &m)
	}
	return m
}

// convertsStored reports whether events of res carry another version
// than res serves, so a watch must rewrite each object.
func convertsStored(res *schemas.Resource) bool {
	return res.Custom != nil && res.Custom.StorageVersion != res.GroupVersion.Version
}

// markCRDDeleted adds what kube's CRD REST Delete adds on the first delete
// of a definition: the cleanup finalizer, which keeps it until its objects
// are gone, and the Terminating condition, which stops creates at once.
func markCRDDeleted(obj schemas.Object, finalizers []string) []string {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return finalizers
	}
	apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
		Type:    apiextensionsv1.Terminating,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  "InstanceDeletionPending",
		Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
	})
	return addString(finalizers, apiextensionsv1.CustomResourceCleanupFinalizer)
}

// getCustom is the field manager of a custom kind, built from its
// definition's schema.
func (f *fieldManagers) getCustom(res *schemas.Resource, subresource string) (*managedfields.FieldManager, error) {
	k := fieldManagerKey{gvk: res.GVK(), subresource: subresource, custom: res.Custom}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm, ok := f.m[k]; ok {
		return fm, nil
	}
	fm, err := managedfields.NewDefaultFieldManager(res.Custom.TypeConverter, noneConverter{},
		defaulter{res}, unstructuredCreator{}, k.gvk, k.gvk.GroupVersion(), subresource, resetFields(res, subresource))
	if err != nil {
		return nil, fmt.Errorf("apiserver: field manager for %v: %w", k.gvk, err)
	}
	if f.m == nil {
		f.m = map[fieldManagerKey]*managedfields.FieldManager{}
	}
	// Field managers of replaced definitions go with their generation.
	for old := range f.m {
		if old.custom != nil && old.gvk == k.gvk && old.custom != k.custom {
			delete(f.m, old)
		}
	}
	f.m[k] = fm
	return fm, nil
}

// noneConverter is conversion None: an object in another version only
// changes its apiVersion.
type noneConverter struct{}

func (noneConverter) Convert(in, out, _ any) error {
	u, ok := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return fmt.Errorf("apiserver: convert %T to %T", in, out)
	}
	o.Object = runtime.DeepCopyJSON(u.Object)
	return nil
}

func (noneConverter) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("apiserver: convert a %T", in)
	}
	out := u.DeepCopy()
	if target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()}); ok {
		out.SetGroupVersionKind(target)
	}
	return out, nil
}

func (noneConverter) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// unstructuredCreator makes empty custom objects of a kind.
type unstructuredCreator struct{}

func (unstructuredCreator) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// UserAPIServer is who the apiserver's own controllers (the CRD
// controllers) write as: kube-apiserver's loopback identity, in
// system:masters.
const UserAPIServer = "system:apiserver"

// Loopback is a client transport to this server in-process, as
// kube-apiserver's loopback client: requests skip authentication and
// authorization and are made as UserAPIServer. Watches are not served
// through it (responses are buffered whole).
func (s *Server) Loopback() http.RoundTripper { return loopback{s} }

type loopback struct{ s *Server }

func (l loopback) RoundTrip(r *http.Request) (*http.Response, error) {
	info := parseRequestInfo(r)
	ctx := context.WithValue(r.Context(), userKey, User{User: UserAPIServer, Groups: []string{GroupMasters, GroupAuthenticated}})
	ctx = context.WithValue(ctx, infoKey, info)
	ctx = context.WithValue(ctx, auditKey, uuid.NewString())
	rec := httptest.NewRecorder()
	if r.Body == nil {
		r.Body = http.NoBody
	}
	l.s.mux.ServeHTTP(rec, r.WithContext(ctx))
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}
