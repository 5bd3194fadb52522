package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/oklog/ulid/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/schemas/codec"
	"github.com/cairn-dev/cairn/services/apiserver/servicealloc"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/webhook"
)

// request is one resource request, resolved.
type request struct {
	r    *http.Request
	w    http.ResponseWriter
	info requestInfo
	res  *schemas.Resource
	out  outputFormat
	// applied: the object comes from a server-side apply, with the
	// managedFields the apply computed.
	applied bool
	// svcTaken is the service allocation, read after a claim failed
	// (services.go); svcAttempts counts those failures.
	svcTaken    *servicealloc.Taken
	svcAttempts int
	// admission is what admission webhooks did (webhooks.go).
	admission *webhook.Record
}

func (q *request) ctx() context.Context { return q.r.Context() }

func (q *request) key() string {
	return storage.Key(q.res.GroupVersion.Group, q.res.Plural, q.info.Namespace, q.info.Name)
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	info, _ := r.Context().Value(infoKey).(requestInfo)
	if !info.IsResourceRequest {
		if strings.Contains(info.APIGroup, ".") && s.cfg.SyncCustom != nil && !s.servesGroup(info.APIGroup, info.APIVersion) {
			// A custom group defined a moment ago (crd.go).
			_ = s.cfg.SyncCustom(r.Context())
		}
		if h := s.cfg.Discovery; h != nil {
			h.ServeHTTP(w, r)
			return
		}
		writeStatus(w, apierrors.NewNotFound(schemaGR("", ""), ""))
		return
	}
	res, ok := s.reg.Lookup(info.APIGroup, info.APIVersion, info.Resource)
	if !ok && strings.Contains(info.APIGroup, ".") && s.cfg.SyncCustom != nil && s.cfg.SyncCustom(r.Context()) == nil {
		res, ok = s.reg.Lookup(info.APIGroup, info.APIVersion, info.Resource)
	}
	if !ok && s.cfg.UnservableCustom != nil && strings.Contains(info.APIGroup, ".") {
		if err := s.cfg.UnservableCustom(info.APIGroup, info.APIVersion, info.Resource); err != nil { // crd.go
			s.log.Warn("apiserver: custom resource cannot be served", "group", info.APIGroup, "resource", info.Resource, "err", err)
			writeStatus(w, apierrors.NewInternalError(errors.New("error resolving resource")))
			return
		}
	}
	if !ok || (!res.Namespaced && info.Namespace != "" && info.Resource != "namespaces") ||
		(info.Subresource != "" && !res.HasSubresource(info.Subresource)) {
		writeStatus(w, apierrors.NewNotFound(schemaGR(info.APIGroup, info.Resource), info.Name))
		return
	}
	out, err := negotiate(r)
	if err != nil {
		writeStatus(w, errNotAcceptable())
		return
	}
	q := &request{r: r, w: w, info: info, res: res, out: out}
	if !exempt(info) {
		s.gate.wait(r.Context())
	}
	if res.Custom != nil && !s.serveCustom(q) { // crd.go
		return
	}
	if _, updater := res.SubresourceUpdates[info.Subresource]; info.Subresource != "" && info.Subresource != "status" &&
		!(updater && (info.Verb == "get" || info.Verb == "update" || info.Verb == "patch")) {
		s.serveSubresource(q)
		return
	}
	switch info.Verb {
	case "get":
		s.get(q)
	case "list":
		s.list(q)
	case "watch":
		s.watch(q)
	case "create":
		if info.Name != "" && info.Subresource == "" {
			writeStatus(w, errMethodNotSupported(res.GroupResource(), "create"))
			return
		}
		s.create(q)
	case "update":
		s.update(q)
	case "patch":
		s.patch(q)
	case "delete":
		s.delete(q)
	case "deletecollection":
		s.deleteCollection(q)
	default:
		writeStatus(w, errMethodNotSupported(res.GroupResource(), info.Verb))
	}
}

// decodeStored decodes a stored value and sets its resourceVersion.
func decodeStored(res *schemas.Resource, kv storage.KV) (schemas.Object, error) {
	obj := res.New()
	if err := codec.Unmarshal(kv.Value, obj); err != nil {
		return nil, fmt.Errorf("apiserver: decode %s: %w", kv.Key, err)
	}
	if res.Custom != nil {
		var err error
		if obj, err = convertCustom(res, obj, res.GroupVersion); err != nil { // crd.go
			return nil, err
		}
		// kube's storage decoder prunes and defaults custom objects too,
		// so a default added to the schema shows on objects stored before.
		res.Default(obj)
	}
	obj.GetObjectKind().SetGroupVersionKind(res.GVK())
	obj.SetResourceVersion(kv.Revision.String())
	return obj, nil
}

func (s *Server) load(ctx context.Context, res *schemas.Resource, key, name string) (schemas.Object, storage.KV, error) {
	kv, err := s.store.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, kv, apierrors.NewNotFound(res.GroupResource(), name)
	}
	if err != nil {
		return nil, kv, err
	}
	obj, err := decodeStored(res, kv)
	return obj, kv, err
}

func (s *Server) get(q *request) {
	obj, _, err := s.load(q.ctx(), q.res, q.key(), q.info.Name)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	s.respondObject(q, http.StatusOK, obj)
}

// respondObject writes one object, as a Table or PartialObjectMetadata when
// the client asked for one.
func (s *Server) respondObject(q *request, code int, obj schemas.Object) {
	switch {
	case q.out.table:
		writeJSON(q.w, code, s.table(q, []schemas.Object{obj}, obj.GetResourceVersion(), ""))
	case q.out.partialMeta:
		writeJSON(q.w, code, partialMeta(obj))
	case q.out.proto:
		writeProto(q.w, code, obj)
	default:
		writeJSON(q.w, code, obj)
	}
}

func partialMeta(obj schemas.Object) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.Kind, m.APIVersion = "PartialObjectMetadata", "meta.k8s.io/v1"
	// meta.Accessor returns the object itself for typed objects, so ask for
	// the embedded ObjectMeta explicitly.
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if om, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok {
			m.ObjectMeta = *om.DeepCopy()
		}
	} else if u, ok := obj.(*unstructured.Unstructured); ok {
		m.ObjectMeta = unstructuredMeta(u)
	}
	return m
}

// selectors parses labelSelector and fieldSelector.
func selectors(q *request) (labels.Selector, fields.Selector, error) {
	v := q.r.URL.Query()
	ls, err := labels.Parse(v.Get("labelSelector"))
	if err != nil {
		return nil, nil, errBadRequest("%v", err) // labels.Parse already says "unable to parse requirement"
	}
	fs, err := fields.ParseSelector(v.Get("fieldSelector"))
	if err != nil {
		return nil, nil, errBadRequest("invalid field selector: %v", err)
	}
	if q.res.Fields != nil {
		// kube rejects selectors on fields it does not index.
		probe := q.res.Fields(q.res.New())
		for _, req := range fs.Requirements() {
			if _, ok := probe[req.Field]; !ok {
				return nil, nil, errBadRequest("field label not supported: %s", req.Field)
			}
		}
	}
	return ls, fs, nil
}

func matches(res *schemas.Resource, obj schemas.Object, ls labels.Selector, fs fields.Selector) bool {
	if !ls.Empty() && !ls.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	if !fs.Empty() {
		var set fields.Set
		if res.Fields != nil {
			set = res.Fields(obj)
		} else {
			set = fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()}
		}
		if !fs.Matches(set) {
			return false
		}
	}
	return true
}

// newWriteMeta builds the metadata committed with a write.
func (s *Server) newWriteMeta(q *request, verb string) *events.WriteMeta {
	id := ulid.Make().String()
	m := &events.WriteMeta{
		ID:            id,
		Verb:          verb,
		Actor:         userFrom(q.ctx()),
		AuditID:       auditIDFrom(q.ctx()),
		CausationID:   q.r.Header.Get(events.HeaderCausationID),
		CorrelationID: q.r.Header.Get(events.HeaderCorrelationID),
		SourceIP:      remoteIP(q.r),
		UserAgent:     q.r.UserAgent(),
		Time:          s.now().UTC(),
		Admission:     admissionMeta(q.admission),
	}
	if m.CorrelationID == "" {
		m.CorrelationID = id
	}
	if q.info.Subresource != "" {
		m.Verb = verb + " " + q.info.Subresource
	}
	q.w.Header().Set(events.HeaderEventID, id)
	return m
}

func remoteIP(r *http.Request) string {
	h := r.RemoteAddr
	if i := strings.LastIndexByte(h, ':'); i > 0 {
		h = h[:i]
	}
	return strings.Trim(h, "[]")
}

func isDryRun(q *request) bool {
	for _, v := range q.r.URL.Query()["dryRun"] {
		if v == "All" {
			return true
		}
	}
	return false
}

func strictFields(q *request) bool {
	return q.r.URL.Query().Get("fieldValidation") == "Strict"
}

func invalid(res *schemas.Resource, name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(res.GVK().GroupKind(), name, errs)
}

func schemaGR(group, resource string) schema.GroupResource {
	return schema.GroupResource{Group: group, Resource: resource}
}

func listObject(res *schemas.Resource, items []schemas.Object, rv, cont string, remaining *int64) (runtime.Object, error) {
	list := res.NewList()
	objs := make([]runtime.Object, len(items))
	for i, it := range items {
		objs[i] = it
	}
	if err := meta.SetList(list, objs); err != nil {
		return nil, fmt.Errorf("apiserver: build list: %w", err)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, fmt.Errorf("apiserver: list meta: %w", err)
	}
	lm.SetResourceVersion(rv)
	lm.SetContinue(cont)
	lm.SetRemainingItemCount(remaining)
	if res.Custom == nil { // a custom list kind is the definition's listKind
		gvk := res.GVK()
		gvk.Kind += "List"
		list.GetObjectKind().SetGroupVersionKind(gvk)
	}
	return list, nil
}

func schemaGK(kind string) schema.GroupKind { return schema.GroupKind{Kind: kind} }

func fieldErr(path, value, msg string) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(path), value, msg)}
}
