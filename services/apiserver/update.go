package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// mutateFunc computes the desired object from the current one (a private
// copy; nil when the object does not exist and create-on-update applies).
type mutateFunc func(cur schemas.Object) (schemas.Object, error)

type updateOpts struct {
	verb string
	// preconditionRV makes a stale resourceVersion in the desired object a
	// 409 instead of a retry (PUT with a resourceVersion).
	preconditionRV bool
	// create lets the write create a missing object (a server-side apply).
	create bool
}

const maxUpdateRetries = 20

var errConflictMsg = errors.New("the object has been modified; please apply your changes to the latest version and try again")

// guaranteedUpdate reads, mutates and compare-and-swaps until it succeeds,
// as kube's GuaranteedUpdate does. A write that changes nothing is not
// committed (and so produces no event).
//
// The first attempt starts from the write cache's guess when it has one
// (writecache.go), later ones from the state a failed transaction
// returned or from a read. Only a state read in this request (current) may
// decide an answer other than success: a refusal, a conflict with the
// caller's resourceVersion or "nothing changed" on a guess is tried again
// on a read.
func (s *Server) guaranteedUpdate(q *request, mutate mutateFunc, o updateOpts) (schemas.Object, int, error) {
	key, name := q.key(), q.info.Name
	// known: kv holds a state to start from; guessed: it is the write
	// cache's, not one read in this request or returned by its last
	// transaction.
	var kv storage.KV
	known, guessed := false, false
	if !isDryRun(q) {
		kv, known = s.writes.get(key)
		guessed = known
	}
	for attempt := 0; attempt < maxUpdateRetries; attempt++ {
		current := !guessed
		if !known {
			var err error
			kv, err = s.store.Get(q.ctx(), key)
			if errors.Is(err, storage.ErrNotFound) {
				if (o.create || q.res.AllowCreateOnUpdate()) && q.info.Subresource == "" {
					obj, err := mutate(nil)
					if err != nil {
						return nil, 0, err
					}
					obj.SetResourceVersion("")
					out, err := s.createObject(q, obj)
					return out, http.StatusCreated, err
				}
				return nil, 0, apierrors.NewNotFound(q.res.GroupResource(), name)
			}
			if err != nil {
				return nil, 0, err
			}
		}
		known, guessed = false, false // unless a failed transaction says what is there
		cur, err := decodeStored(q.res, kv)
		if err != nil {
			if !current {
				continue
			}
			return nil, 0, err
		}
		desired, err := mutate(deepCopy(cur))
		if err != nil {
			if !current {
				continue
			}
			return nil, 0, err
		}
		userRV := desired.GetResourceVersion()
		if userRV != "" && userRV != cur.GetResourceVersion() {
			if !current {
				continue
			}
			return nil, 0, apierrors.NewConflict(q.res.GroupResource(), name, errConflictMsg)
		}
		out, done, now, err := s.commitUpdate(q, kv, cur, desired, current)
		if err != nil {
			if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
				if o.preconditionRV && userRV != "" {
					return nil, 0, apierrors.NewConflict(q.res.GroupResource(), name, errConflictMsg)
				}
				if errors.Is(err, storage.ErrConflict) && now.Revision != 0 {
					kv, known = now, true
				}
				continue
			}
			if !current {
				continue
			}
			return nil, 0, err
		}
		if done {
			return out, http.StatusOK, nil
		}
	}
	return nil, 0, apierrors.NewConflict(q.res.GroupResource(), name, fmt.Errorf("too many concurrent updates: %w", errConflictMsg))
}

// errUnchangedGuess: an update that changes nothing on a guessed state is
// tried again on a read (the object may have changed since).
var errUnchangedGuess = errors.New("apiserver: no change on a guessed state")

// commitUpdate applies the update strategy to desired and commits it. kv
// is current when read in this request (not the write cache's guess). On
// storage.ErrConflict it returns the state the transaction found, when it
// has it.
func (s *Server) commitUpdate(q *request, kv storage.KV, cur, desired schemas.Object, current bool) (schemas.Object, bool, storage.KV, error) {
	if desired.GetName() != q.info.Name {
		return nil, false, storage.KV{}, errBadRequest("the name of the object (%s) does not match the name on the URL (%s)", desired.GetName(), q.info.Name)
	}
	if err := checkNamespace(q, desired); err != nil {
		return nil, false, storage.KV{}, err
	}
	if desired.GetUID() == "" {
		desired.SetUID(cur.GetUID())
	}
	desired.SetCreationTimestamp(cur.GetCreationTimestamp())
	desired.SetDeletionTimestamp(cur.GetDeletionTimestamp())
	desired.SetDeletionGracePeriodSeconds(cur.GetDeletionGracePeriodSeconds())
	desired.SetGeneration(cur.GetGeneration())
	desired.SetSelfLink("")
	if desired.GetResourceVersion() == "" {
		// An unconditional update: validation wants the version it updates.
		desired.SetResourceVersion(cur.GetResourceVersion())
	}
	if q.res.Default != nil {
		q.res.Default(desired)
	}
	ar := &AdmissionRequest{Resource: q.res, Subresource: q.info.Subresource, Operation: "UPDATE", Namespace: q.info.Namespace,
		Name: q.info.Name, Object: desired, OldObject: cur, User: userFrom(q.ctx()), DryRun: isDryRun(q)}
	if err := s.mutate(ar); err != nil {
		return nil, false, storage.KV{}, err
	}
	q.admission = nil // a retry starts over
	if err := s.mutateWebhooks(q, ar); err != nil {
		return nil, false, storage.KV{}, err
	}
	desired = ar.Object
	// A binding is built by the server itself; pod-spec immutability does
	// not apply to spec.nodeName set through it. A finalize is built by
	// the server too (only spec.finalizers changes, see finalize).
	trusted := q.info.Subresource == "binding" || q.info.Subresource == "finalize"
	sub, isSub := q.res.SubresourceUpdates[q.info.Subresource]
	if trusted {
	} else if isSub {
		sub.Prepare(desired, cur)
	} else if q.info.Subresource == "status" {
		if q.res.PrepareForStatusUpdate != nil {
			q.res.PrepareForStatusUpdate(desired, cur)
		}
	} else if q.res.PrepareForUpdate != nil {
		q.res.PrepareForUpdate(desired, cur)
	}
	if err := s.admit(q.ctx(), ar); err != nil {
		return nil, false, storage.KV{}, err
	}
	var w *serviceWrite // a Service's allocation, see services.go
	if q.info.Subresource == "" {
		var err error
		if w, err = s.newServiceWrite(q, desired, cur); err != nil {
			return nil, false, storage.KV{}, err
		}
		if desired, err = w.assign(q, desired); err != nil {
			return nil, false, storage.KV{}, err
		}
	}
	switch {
	case trusted:
	case isSub:
		if errs := sub.Validate(desired, cur); len(errs) > 0 {
			return nil, false, storage.KV{}, invalid(q.res, q.info.Name, errs)
		}
	case q.info.Subresource == "status":
		if errs := q.res.ValidateStatus(desired, cur); len(errs) > 0 {
			return nil, false, storage.KV{}, invalid(q.res, q.info.Name, errs)
		}
	case q.res.ValidateUpdate != nil:
		if errs := q.res.ValidateUpdate(desired, cur); len(errs) > 0 {
			return nil, false, storage.KV{}, invalid(q.res, q.info.Name, errs)
		}
	}
	ar.Object = desired
	if err := s.validateWebhooks(q, ar); err != nil {
		return nil, false, storage.KV{}, err
	}
	if cur.GetDeletionTimestamp() != nil && hasNewFinalizer(cur.GetFinalizers(), desired.GetFinalizers()) {
		return nil, false, storage.KV{}, apierrors.NewForbidden(q.res.GroupResource(), q.info.Name, errors.New("no new finalizers can be added if the object is being deleted"))
	}
	if !q.applied {
		var err error
		if desired, err = s.trackUpdate(q, cur, desired); err != nil {
			return nil, false, storage.KV{}, err
		}
	}
	if isDryRun(q) {
		return desired, true, storage.KV{}, w.checkDryRun(s, q)
	}
	if shouldDeleteDuringUpdate(desired) {
		rev, now, err := s.store.Delete(q.ctx(), kv.Key, kv.Revision, s.newWriteMeta(q, "delete"), s.releases(cur)...)
		if err != nil {
			return nil, false, now, err
		}
		s.writes.drop(kv.Key)
		desired.SetResourceVersion(rev.String())
		return desired, true, storage.KV{}, nil
	}
	val, err := encodeFor(q.res, desired)
	if err != nil {
		return nil, false, storage.KV{}, err
	}
	if bytes.Equal(val, kv.Value) {
		if !current {
			return nil, false, storage.KV{}, errUnchangedGuess
		}
		return cur, true, storage.KV{}, nil
	}
	var rev events.Revision
	var now storage.KV
	if pod, ok := desired.(*corev1.Pod); ok && q.info.Subresource == "binding" {
		rev, err = s.commitBinding(q, kv, pod, val)
	} else {
		meta := s.newWriteMeta(q, q.info.Verb)
		meta.Moved = controllerName(cur) != controllerName(desired)
		rev, now, err = s.store.Update(q.ctx(), kv.Key, val, kv.Revision, meta, w.extra()...)
	}
	if err != nil {
		return nil, false, now, w.failed(s, q, err)
	}
	s.writes.put(storage.KV{Key: kv.Key, Value: val, Revision: rev, CreateRevision: kv.CreateRevision})
	desired.SetResourceVersion(rev.String())
	return desired, true, storage.KV{}, nil
}

// controllerName is the name of obj's controller owner, "" if none: the
// events of an update that changes it go out on no partition (see
// events.Partition).
func controllerName(obj metav1.Object) string {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return ref.Name
	}
	return ""
}

// shouldDeleteDuringUpdate: an object being deleted whose last finalizer was
// just removed and whose grace period is over goes away (kube's
// ShouldDeleteDuringUpdate).
// A namespace also waits for its spec.finalizers (kube's namespace REST).
func shouldDeleteDuringUpdate(obj schemas.Object) bool {
	if obj.GetDeletionTimestamp() == nil || len(obj.GetFinalizers()) > 0 {
		return false
	}
	if ns, ok := obj.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
		return false
	}
	g := obj.GetDeletionGracePeriodSeconds()
	return g == nil || *g == 0
}

func hasNewFinalizer(old, cur []string) bool {
	have := map[string]bool{}
	for _, f := range old {
		have[f] = true
	}
	for _, f := range cur {
		if !have[f] {
			return true
		}
	}
	return false
}

func (s *Server) update(q *request) {
	obj, err := decodeRequestObject(q.r, q.res, strictFields(q))
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	if q.res.Plural == "namespaces" && obj.GetName() == "" {
		obj.SetName(q.info.Name)
	}
	out, code, err := s.guaranteedUpdate(q, func(schemas.Object) (schemas.Object, error) {
		return deepCopy(obj), nil
	}, updateOpts{verb: "update", preconditionRV: true})
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	s.respondObject(q, code, out)
}

func (s *Server) patch(q *request) {
	pt := mediaType(q.r.Header.Get("Content-Type"))
	switch pt {
	case "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", applyPatchType:
	default:
		writeStatus(q.w, errUnsupportedMedia(pt))
		return
	}
	if pt == "application/strategic-merge-patch+json" && q.res.Custom != nil {
		// Custom resources have no patch strategies: kube refuses.
		writeStatus(q.w, errCustomPatchType(pt))
		return
	}
	manager, force, err := applyOptions(q, pt == applyPatchType)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	body, err := readBody(q.r)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	mutate := func(cur schemas.Object) (schemas.Object, error) {
		if cur == nil {
			return nil, apierrors.NewNotFound(q.res.GroupResource(), q.info.Name)
		}
		patched, err := applyPatch(q.res, pt, cur, body)
		if err != nil {
			return nil, err
		}
		return decodeObject(q.res, patched, strictFields(q))
	}
	if pt == applyPatchType {
		applied, err := decodeApply(q, body)
		if err != nil {
			writeStatus(q.w, err)
			return
		}
		q.applied = true
		mutate = func(cur schemas.Object) (schemas.Object, error) {
			return s.applyTo(q, cur, applied, manager, force)
		}
	}
	out, code, err := s.guaranteedUpdate(q, mutate, updateOpts{verb: "patch", create: q.applied})
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	s.respondObject(q, code, out)
}

func applyPatch(res *schemas.Resource, pt string, cur schemas.Object, patch []byte) ([]byte, error) {
	orig, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	var out []byte
	switch pt {
	case "application/json-patch+json":
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, errBadRequest("error decoding json patch: %v", err)
		}
		out, err = p.Apply(orig)
		if err != nil {
			return nil, patchError(res, cur.GetName(), err)
		}
	case "application/merge-patch+json":
		if !json.Valid(patch) {
			return nil, errBadRequest("error decoding merge patch: invalid JSON")
		}
		out, err = jsonpatch.MergePatch(orig, patch)
		if err != nil {
			return nil, patchError(res, cur.GetName(), err)
		}
	default:
		if !json.Valid(patch) {
			return nil, errBadRequest("error decoding strategic merge patch: invalid JSON")
		}
		out, err = strategicpatch.StrategicMergePatch(orig, patch, res.New())
		if err != nil {
			return nil, patchError(res, cur.GetName(), err)
		}
	}
	return out, nil
}

// patchError reports a patch that does not apply as 422 Invalid with the
// reason as a cause: kubectl prints causes, and drops a bare message.
func patchError(res *schemas.Resource, name string, err error) error {
	return apierrors.NewInvalid(res.GVK().GroupKind(), name, field.ErrorList{{
		Type: field.ErrorTypeInvalid, Field: "patch", BadValue: field.OmitValueType{}, Detail: err.Error(),
	}})
}
