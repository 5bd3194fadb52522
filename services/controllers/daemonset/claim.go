package daemonset

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/podclaim"
)

// adoption decides, once per round (for pods and ControllerRevisions
// alike) and with a fresh read, whether the DaemonSet may adopt orphans:
// not if it was deleted, is being deleted or was replaced since the cache
// saw it (podclaim.Recheck, kube's RecheckDeletionTimestamp). A failed
// read is not remembered: the next ask reads again.
type adoption struct {
	ds    *appsv1.DaemonSet
	check func(context.Context) (bool, error)
	decided,
	ok bool
}

func (c *Controller) newAdoption(ds *appsv1.DaemonSet) *adoption {
	return &adoption{ds: ds, check: podclaim.Recheck(ds, func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	})}
}

func (a *adoption) allowed(ctx context.Context) (bool, error) {
	if a.decided {
		return a.ok, nil
	}
	ok, err := a.check(ctx)
	if err != nil {
		return false, err
	}
	a.decided, a.ok = true, ok
	return ok, nil
}

// claimPods is the pods the DaemonSet controls (kube's getDaemonPods,
// package podclaim): its own that still match sel, and the matching
// orphans it adopts now; its own that stopped matching are released. A
// DaemonSet being deleted neither adopts nor releases.
func (c *Controller) claimPods(ctx context.Context, a *adoption, sel labels.Selector) ([]*corev1.Pod, error) {
	ds := a.ds
	candidates := c.pods.ByIndex(consumer.IndexOwner, string(ds.UID))
	if ds.DeletionTimestamp == nil {
		candidates = append(candidates, c.pods.ByIndex(podclaim.OrphanIndex, ds.Namespace)...)
	}
	owner := podclaim.Owner{Object: ds, Kind: controllerKind, Selector: sel, CanAdopt: a.allowed}
	pods, err := podclaim.Claimer{Client: c.client, Log: c.log}.Claim(ctx, owner, candidates)
	if err != nil {
		return nil, fmt.Errorf("daemonset: %s/%s: claim pods: %w", ds.Namespace, ds.Name, err)
	}
	return pods, nil
}

// claimRevisions is the ControllerRevisions the DaemonSet controls
// (kube's controlledHistories), claimed as claimPods claims pods: its own
// that still match sel, and the matching orphans it adopts now (skipping
// those gone); its own that stopped matching are released. A DaemonSet
// being deleted neither adopts nor releases.
func (c *Controller) claimRevisions(ctx context.Context, a *adoption, sel labels.Selector) ([]*appsv1.ControllerRevision, error) {
	ds := a.ds
	wrap := func(err error) error {
		return fmt.Errorf("daemonset: %s/%s: claim revisions: %w", ds.Namespace, ds.Name, err)
	}
	deleting := ds.DeletionTimestamp != nil
	var (
		out  []*appsv1.ControllerRevision
		errs []error
	)
	for _, r := range c.revs.ByIndex(consumer.IndexOwner, string(ds.UID)) {
		if sel.Matches(labels.Set(r.Labels)) {
			out = append(out, r)
		} else if !deleting {
			if _, err := c.history.Release(ctx, ds, r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// history.List holds those matching sel, ds's own or nobody's.
	for _, r := range c.history.List(ds, sel) {
		if deleting {
			break
		}
		if metav1.GetControllerOfNoCopy(r) != nil || r.DeletionTimestamp != nil {
			continue
		}
		ok, err := a.allowed(ctx)
		if err != nil {
			return nil, wrap(err)
		}
		if !ok {
			break
		}
		switch _, err := c.history.Adopt(ctx, ds, controllerKind, r); {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, err)
		default:
			out = append(out, r)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, wrap(err)
	}
	return out, nil
}
