package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// dryRunFromBody makes a dryRun that DeleteOptions carry visible to
// isDryRun, which reads the query: client-go sends it in the body.
func dryRunFromBody(q *request, o metav1.DeleteOptions) {
	if slices.Contains(o.DryRun, metav1.DryRunAll) && !isDryRun(q) {
		v := q.r.URL.Query()
		v.Add("dryRun", metav1.DryRunAll)
		q.r.URL.RawQuery = v.Encode()
	}
}

// deleteOptions reads DeleteOptions from the body (if any) and the query.
func deleteOptions(q *request) (metav1.DeleteOptions, error) {
	var o metav1.DeleteOptions
	if q.r.ContentLength != 0 && q.r.Body != nil {
		body, err := readBody(q.r)
		if err != nil {
			return o, err
		}
		if len(body) > 0 {
			if err := decodeInto(body, &o, false); err != nil {
				return o, err
			}
		}
	}
	dryRunFromBody(q, o)
	v := q.r.URL.Query()
	if g := v.Get("gracePeriodSeconds"); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return o, errBadRequest("invalid gracePeriodSeconds %q", g)
		}
		o.GracePeriodSeconds = &n
	}
	if p := v.Get("propagationPolicy"); p != "" {
		pp := metav1.DeletionPropagation(p)
		o.PropagationPolicy = &pp
	}
	if o.PropagationPolicy != nil {
		switch *o.PropagationPolicy {
		case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan:
		default:
			return o, apierrors.NewInvalid(schemaGK("DeleteOptions"), "", fieldErr("propagationPolicy", string(*o.PropagationPolicy), "must be Background, Foreground or Orphan"))
		}
	}
	if o.OrphanDependents != nil && o.PropagationPolicy == nil {
		pp := metav1.DeletePropagationBackground
		if *o.OrphanDependents {
			pp = metav1.DeletePropagationOrphan
		}
		o.PropagationPolicy = &pp
	}
	return o, nil
}

func (s *Server) delete(q *request) {
	opts, err := deleteOptions(q)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	obj, gone, err := s.deleteObject(q, q.key(), q.info.Name, opts)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	if gone && q.res.Plural != "pods" {
		writeJSON(q.w, http.StatusOK, &metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusSuccess,
			Details: &metav1.StatusDetails{Name: obj.GetName(), Group: q.res.GroupVersion.Group,
				Kind: q.res.Plural, UID: obj.GetUID()},
		})
		return
	}
	s.respondObject(q, http.StatusOK, obj)
}

// graceFor is the grace period a delete gets: pods bound to a node get
// theirs (the kubelet finishes the delete); everything else goes at once.
func graceFor(res *schemas.Resource, obj schemas.Object, opts metav1.DeleteOptions) int64 {
	pod, ok := obj.(*corev1.Pod)
	if !ok || res.Plural != "pods" {
		return 0
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0
	}
	if opts.GracePeriodSeconds != nil {
		return max(*opts.GracePeriodSeconds, 0)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return 30
}

// propagationFor is the propagation policy of a delete: the one the
// options name, else the orphaning default of a kind like batch/v1 Jobs
// unless the object carries a GC finalizer already (kube's
// shouldOrphanDependents). nil means Background.
func propagationFor(res *schemas.Resource, cur schemas.Object, opts metav1.DeleteOptions) *metav1.DeletionPropagation {
	if opts.PropagationPolicy != nil || !res.OrphanByDefault {
		return opts.PropagationPolicy
	}
	for _, f := range cur.GetFinalizers() {
		if f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents {
			return nil
		}
	}
	orphan := metav1.DeletePropagationOrphan
	return &orphan
}

// deleteObject deletes, or marks for deletion when finalizers or a grace
// period apply. gone reports that the key was removed.
func (s *Server) deleteObject(q *request, key, name string, opts metav1.DeleteOptions) (schemas.Object, bool, error) {
	for attempt := 0; attempt < maxUpdateRetries; attempt++ {
		kv, err := s.store.Get(q.ctx(), key)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, false, apierrors.NewNotFound(q.res.GroupResource(), name)
		}
		if err != nil {
			return nil, false, err
		}
		cur, err := decodeStored(q.res, kv)
		if err != nil {
			return nil, false, err
		}
		if p := opts.Preconditions; p != nil {
			if p.UID != nil && *p.UID != cur.GetUID() {
				return nil, false, apierrors.NewConflict(q.res.GroupResource(), name,
					fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, cur.GetUID()))
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
				return nil, false, apierrors.NewConflict(q.res.GroupResource(), name,
					fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, cur.GetResourceVersion()))
			}
		}
		ar := &AdmissionRequest{Resource: q.res, Operation: "DELETE", Namespace: cur.GetNamespace(), Name: name,
			OldObject: cur, User: userFrom(q.ctx()), DryRun: isDryRun(q)}
		if err := s.admit(q.ctx(), ar); err != nil {
			return nil, false, err
		}
		q.admission = nil // a retry starts over
		if err := s.mutateWebhooks(q, ar); err != nil {
			return nil, false, err
		}
		if err := s.validateWebhooks(q, ar); err != nil {
			return nil, false, err
		}
		grace := graceFor(q.res, cur, opts)
		marked := deepCopy(cur)
		finalizers := marked.GetFinalizers()
		if policy := propagationFor(q.res, cur, opts); policy != nil && cur.GetDeletionTimestamp() == nil {
			switch *policy {
			case metav1.DeletePropagationForeground:
				finalizers = addString(finalizers, metav1.FinalizerDeleteDependents)
			case metav1.DeletePropagationOrphan:
				finalizers = addString(finalizers, metav1.FinalizerOrphanDependents)
			}
		}
		if cur.GetDeletionTimestamp() == nil {
			finalizers = markCRDDeleted(marked, finalizers) // crd.go
		}
		if ns, ok := marked.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
			// spec.finalizers keep the namespace, Terminating, until the
			// namespace controller has removed its content.
			if cur.GetDeletionTimestamp() != nil {
				return cur, false, nil
			}
			ns.Status.Phase = corev1.NamespaceTerminating
			ns.SetFinalizers(finalizers)
			now := metav1.NewTime(s.now().Truncate(time.Second))
			zero := int64(0)
			ns.SetDeletionTimestamp(&now)
			ns.SetDeletionGracePeriodSeconds(&zero)
			out, err := s.commitMark(q, kv, ns)
			if errors.Is(err, storage.ErrConflict) {
				continue
			}
			s.nsCache.forget(name)
			return out, false, err
		}
		if len(finalizers) > 0 || grace > 0 {
			if cur.GetDeletionTimestamp() != nil {
				// Already being deleted: kube only shortens the grace period.
				old := cur.GetDeletionGracePeriodSeconds()
				if old == nil || grace >= *old || len(finalizers) > 0 && grace > 0 {
					return cur, false, nil
				}
			}
			marked.SetFinalizers(finalizers)
			now := metav1.NewTime(s.now().Add(time.Duration(grace) * time.Second).Truncate(time.Second))
			marked.SetDeletionTimestamp(&now)
			marked.SetDeletionGracePeriodSeconds(&grace)
			if cur.GetDeletionTimestamp() != nil {
				marked.SetDeletionTimestamp(cur.GetDeletionTimestamp())
			}
			out, err := s.commitMark(q, kv, marked)
			if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
				continue
			}
			return out, false, err
		}
		if isDryRun(q) {
			return cur, true, nil
		}
		rev, _, err := s.store.Delete(q.ctx(), key, kv.Revision, s.newWriteMeta(q, "delete"), s.releases(cur)...)
		if errors.Is(err, storage.ErrConflict) {
			continue
		}
		if errors.Is(err, storage.ErrNotFound) {
			return nil, false, apierrors.NewNotFound(q.res.GroupResource(), name)
		}
		if err != nil {
			return nil, false, err
		}
		s.writes.drop(key)
		cur.SetResourceVersion(rev.String())
		return cur, true, nil
	}
	return nil, false, apierrors.NewConflict(q.res.GroupResource(), name, errConflictMsg)
}

// commitMark writes the deletion mark (deletionTimestamp, finalizers).
func (s *Server) commitMark(q *request, kv storage.KV, marked schemas.Object) (schemas.Object, error) {
	if isDryRun(q) {
		return marked, nil
	}
	val, err := encodeFor(q.res, marked)
	if err != nil {
		return nil, err
	}
	rev, _, err := s.store.Update(q.ctx(), kv.Key, val, kv.Revision, s.newWriteMeta(q, "delete"))
	if err != nil {
		return nil, err
	}
	s.writes.put(storage.KV{Key: kv.Key, Value: val, Revision: rev, CreateRevision: kv.CreateRevision})
	marked.SetResourceVersion(rev.String())
	return marked, nil
}

func addString(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func (s *Server) deleteCollection(q *request) {
	opts, err := deleteOptions(q)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	items, _, _, _, err := s.listItems(q)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	var deleted []schemas.Object
	for _, it := range items {
		key := storage.Key(q.res.GroupVersion.Group, q.res.Plural, it.GetNamespace(), it.GetName())
		obj, _, err := s.deleteObject(q, key, it.GetName(), opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			writeStatus(q.w, err)
			return
		}
		deleted = append(deleted, obj)
	}
	list, err := listObject(q.res, deleted, "", "", nil)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	writeJSON(q.w, http.StatusOK, list)
}
