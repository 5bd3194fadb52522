package statefulset

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/eventrecord"
)

// This file ports kube's stateful_pod_control.go: the writes to a set's
// pods, each recorded as an Event on the set.

// createPod creates pod, after its claims (see ensureClaims). An
// AlreadyExists (the pod cache is behind, or a pod of that name is not
// the set's) is returned without an Event, as kube sinks it.
func (c *Controller) createPod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	if err := c.ensureClaims(ctx, set, pod); err != nil {
		c.podEvent(ctx, "create", set, pod, err)
		return err
	}
	_, err := c.client.CoreV1().Pods(set.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return err
	}
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		// The namespace goes away with its pods: nothing to do.
		return nil
	}
	c.podEvent(ctx, "create", set, pod, err)
	return err
}

// updatePod brings pod's identity and storage in line with set: labels
// and volumes are all a pod update may change (kube's
// UpdateStatefulPod). A conflict is retried on a fresh read.
func (c *Controller) updatePod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	api := c.client.CoreV1().Pods(set.Namespace)
	attempted := false
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		consistent := true
		if !identityMatches(set, pod) {
			updateIdentity(set, pod)
			consistent = false
		}
		if !storageMatches(set, pod) {
			updateStorage(set, pod)
			consistent = false
			if err = c.ensureClaims(ctx, set, pod); err != nil {
				c.podEvent(ctx, "update", set, pod, err)
				return err
			}
		}
		if consistent {
			err = nil
			break
		}
		attempted = true
		_, err = api.Update(ctx, pod, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			break
		}
		fresh, gerr := api.Get(ctx, pod.Name, metav1.GetOptions{})
		if gerr != nil {
			err = gerr
			break
		}
		pod = fresh
	}
	if attempted {
		c.podEvent(ctx, "update", set, pod, err)
	}
	return err
}

// deletePod deletes pod, and only that pod: the UID precondition keeps a
// round that sees a stale cache from deleting the pod that replaced it
// under the same name. A pod already gone is no error.
func (c *Controller) deletePod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	uid := pod.UID
	err := c.client.CoreV1().Pods(set.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or replaced already (the precondition failed).
		return nil
	}
	c.podEvent(ctx, "delete", set, pod, err)
	return err
}

// podEvent records verb on pod as kube does: Normal SuccessfulCreate
// "create Pod db-0 in StatefulSet db successful", or Warning FailedCreate
// "create Pod db-0 in StatefulSet db failed error: ...".
func (c *Controller) podEvent(ctx context.Context, verb string, set *appsv1.StatefulSet, pod *corev1.Pod, err error) {
	title := strings.ToUpper(verb[:1]) + verb[1:]
	if err == nil {
		c.event(ctx, set, corev1.EventTypeNormal, "Successful"+title,
			fmt.Sprintf("%s Pod %s in StatefulSet %s successful", verb, pod.Name, set.Name))
		return
	}
	c.event(ctx, set, corev1.EventTypeWarning, "Failed"+title,
		fmt.Sprintf("%s Pod %s in StatefulSet %s failed error: %s", verb, pod.Name, set.Name, err.Error()))
}

// event records an Event about set; ctx carries the cause.
func (c *Controller) event(ctx context.Context, set *appsv1.StatefulSet, typ, reason, msg string) {
	c.recorder.Event(ctx, eventrecord.Ref(set, controllerKind), typ, reason, "", msg)
}
