package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// maxDisruptedPods bounds status.disruptedPods of a budget, as kube's
// MaxDisruptedPodSize.
const maxDisruptedPods = 2000

// evict serves POST pods/eviction (policy/v1 Eviction, what kubectl drain
// sends), as kube's eviction REST does: the pod is deleted as the
// Eviction's deleteOptions say (grace period, preconditions, dry run),
// unless a PodDisruptionBudget forbids it.
//
//   - A pod that is Pending, Succeeded, Failed or being deleted ignores
//     budgets.
//   - A pod matched by no budget is deleted; by more than one, the eviction
//     fails (500, as kube).
//   - A pod that is not Ready is deleted without counting against its
//     budget when the budget's unhealthyPodEvictionPolicy is AlwaysAllow,
//     or (IfHealthyBudget, the default) when the budget is met.
//   - Otherwise the budget must allow a disruption: the eviction takes one
//     (disruptionsAllowed less one, the pod in disruptedPods) in the same
//     compare-and-swap on the budget that reads it, then deletes the pod.
//     A budget with none left, or not yet observed by the disruption
//     controller at its generation, answers 429 TooManyRequests with a
//     DisruptionBudget cause; kubectl drain retries those.
//
// Success is 201 with a Success Status.
func (s *Server) evict(q *request) {
	// readBody turns a protobuf body into JSON, as for a binding.
	body, err := readBody(q.r)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	var ev policyv1.Eviction
	if err := decodeInto(body, &ev, strictFields(q)); err != nil {
		writeStatus(q.w, err)
		return
	}
	if ev.Name != "" && ev.Name != q.info.Name {
		writeStatus(q.w, errBadRequest("name in URL does not match name in Eviction object"))
		return
	}
	if ev.Namespace != "" && ev.Namespace != q.info.Namespace {
		writeStatus(q.w, errBadRequest("namespace in URL does not match namespace in Eviction object"))
		return
	}
	var opts metav1.DeleteOptions
	if ev.DeleteOptions != nil {
		opts = *ev.DeleteOptions
	}
	dryRunFromBody(q, opts)
	// Admission sees the eviction as kube's does: a create of pods/eviction.
	if err := s.admit(q.ctx(), &AdmissionRequest{Resource: q.res, Subresource: "eviction", Operation: "CREATE",
		Namespace: q.info.Namespace, Name: q.info.Name, Object: &ev, User: userFrom(q.ctx()), DryRun: isDryRun(q)}); err != nil {
		writeStatus(q.w, err)
		return
	}
	if err := s.takeDisruption(q); err != nil {
		writeStatus(q.w, err)
		return
	}
	if _, _, err := s.deleteObject(q, q.key(), q.info.Name, opts); err != nil {
		writeStatus(q.w, err)
		return
	}
	writeJSON(q.w, http.StatusCreated, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

// takeDisruption checks the pod's budget and takes one disruption from it
// (see evict), retrying when the budget changes under it.
func (s *Server) takeDisruption(q *request) error {
	res, ok := s.reg.Lookup(policyv1.GroupName, "v1", "poddisruptionbudgets")
	if !ok {
		return nil
	}
	for attempt := 0; attempt < maxUpdateRetries; attempt++ {
		pod, err := s.getPod(q)
		if err != nil {
			return err
		}
		if ignoresBudgets(pod) {
			return nil
		}
		pdb, kv, err := s.budgetOf(q, res, pod)
		if err != nil || pdb == nil {
			return err
		}
		if !schemas.PodReady(pod) {
			p := pdb.Spec.UnhealthyPodEvictionPolicy
			if p != nil && *p == policyv1.AlwaysAllow ||
				pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
				return nil
			}
		}
		if err := refusal(pdb); err != nil {
			return err
		}
		upd := pdb.DeepCopy()
		upd.Status.DisruptionsAllowed--
		if upd.Status.DisruptionsAllowed == 0 {
			schemas.SetDisruptionAllowed(upd)
		}
		if upd.Status.DisruptedPods == nil {
			upd.Status.DisruptedPods = map[string]metav1.Time{}
		}
		upd.Status.DisruptedPods[pod.Name] = metav1.NewTime(s.now())
		// The budget's status is written as pods/eviction's own part: the
		// same user, the same dry run, the same causation.
		bq := &request{r: q.r, w: q.w, res: res, out: q.out, info: requestInfo{IsResourceRequest: true, Verb: "update",
			APIGroup: policyv1.GroupName, APIVersion: "v1", Namespace: pdb.Namespace, Resource: res.Plural, Subresource: "status", Name: pdb.Name}}
		_, _, _, err = s.commitUpdate(bq, kv, pdb, upd, true)
		if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
			continue
		}
		return err
	}
	return apierrors.NewConflict(q.res.GroupResource(), q.info.Name, errConflictMsg)
}

// ignoresBudgets: a pod that is not running, or already being deleted, is
// evicted whatever its budget says (kube's canIgnorePDB).
func ignoresBudgets(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// budgetOf reads the budgets of pod's namespace and returns the one that
// selects it (nil if none), with its stored KV.
func (s *Server) budgetOf(q *request, res *schemas.Resource, pod *corev1.Pod) (*policyv1.PodDisruptionBudget, storage.KV, error) {
	list, err := s.store.List(q.ctx(), storage.Key(policyv1.GroupName, res.Plural, pod.Namespace, ""), storage.ListOptions{})
	if err != nil {
		return nil, storage.KV{}, err
	}
	var (
		found *policyv1.PodDisruptionBudget
		at    storage.KV
	)
	for _, kv := range list.Items {
		obj, err := decodeStored(res, kv)
		if err != nil {
			return nil, storage.KV{}, err
		}
		pdb := obj.(*policyv1.PodDisruptionBudget)
		if !schemas.BudgetSelects(pdb, pod) {
			continue
		}
		if found != nil {
			return nil, storage.KV{}, apierrors.NewInternalError(errors.New("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))
		}
		found, at = pdb, kv
	}
	return found, at, nil
}

// refusal is why pdb allows no eviction now, nil if it allows one.
func refusal(pdb *policyv1.PodDisruptionBudget) error {
	tooMany := func(cause string) error {
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
		return err
	}
	gr := policyv1.Resource("poddisruptionbudgets")
	switch st := pdb.Status; {
	case st.ObservedGeneration < pdb.Generation:
		return tooMany(fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name))
	case st.DisruptionsAllowed < 0:
		return apierrors.NewForbidden(gr, pdb.Name, errors.New("pdb disruptions allowed is negative"))
	case len(st.DisruptedPods) > maxDisruptedPods:
		return apierrors.NewForbidden(gr, pdb.Name, errors.New("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
	case st.DisruptionsAllowed == 0:
		return tooMany(fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, st.DesiredHealthy, st.CurrentHealthy))
	}
	return nil
}
