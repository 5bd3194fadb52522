package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
	"github.com/cairn-dev/cairn/services/scheduler/preemption"
	"github.com/cairn-dev/cairn/services/scheduler/queue"
)

// OvercommitPrefix starts the message of the 409 Conflict the apiserver
// returns for a binding that would overcommit the node.
const OvercommitPrefix = "binding rejected: node"

// counters count what the replica did.
type counters struct {
	attempts, scheduled, unschedulable, conflicts, overcommits, preemptions, victims atomic.Int64
}

// Stats are a replica's counters.
type Stats struct {
	// Attempts is the number of scheduling cycles.
	Attempts int64
	// Scheduled counts successful bindings.
	Scheduled int64
	// Unschedulable counts cycles that found no node.
	Unschedulable int64
	// Conflicts counts bindings refused because the pod was bound (by
	// another replica) or deleted meanwhile.
	Conflicts int64
	// Overcommits counts bindings the apiserver refused as overcommitting.
	Overcommits int64
	// Preemptions counts nominations; Victims the pods evicted for them.
	Preemptions, Victims int64
}

// Stats returns the replica's counters.
func (s *Scheduler) Stats() Stats {
	c := &s.stats
	return Stats{Attempts: c.attempts.Load(), Scheduled: c.scheduled.Load(), Unschedulable: c.unschedulable.Load(),
		Conflicts: c.conflicts.Load(), Overcommits: c.overcommits.Load(), Preemptions: c.preemptions.Load(), Victims: c.victims.Load()}
}

// loop schedules one pod at a time until ctx ends, then waits for the
// bindings and writes in flight.
func (s *Scheduler) loop(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	if err := s.WaitForSync(ctx); err != nil {
		return nil //nolint:nilerr // ctx ended before the caches synced: a clean stop
	}
	wg.Go(func() { s.queue.Run(ctx, 100*time.Millisecond) })
	for {
		qp, err := s.queue.Pop(ctx)
		if err != nil {
			return nil
		}
		s.scheduleOne(ctx, qp, &wg)
	}
}

// async runs fn on a worker slot, owned by wg.
func (s *Scheduler) async(ctx context.Context, wg *sync.WaitGroup, fn func()) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	wg.Go(func() {
		defer func() { <-s.sem }()
		fn()
	})
}

func (s *Scheduler) scheduleOne(ctx context.Context, qp *queue.QueuedPod, wg *sync.WaitGroup) {
	pod, ok := s.pods.Get(qp.Pod.Namespace, qp.Pod.Name)
	if !ok || pod.UID != qp.Pod.UID || !s.responsible(pod) || s.cache.isAssumed(qp.Key) {
		s.queue.Done(qp.Key)
		return
	}
	s.stats.attempts.Add(1)
	var res fw.Result
	var err error
	var pr preemption.Result
	s.cache.read(func(snap *fw.Snapshot) {
		res, err = s.fw.Schedule(ctx, qp.PodInfo, snap)
		var fe *fw.FitError
		if errors.As(err, &fe) {
			pr = preemption.Preempt(ctx, s.fw, qp.PodInfo, snap, fe.Diagnosis)
		}
	})
	var fe *fw.FitError
	switch {
	case errors.As(err, &fe):
		s.unschedulable(ctx, wg, qp, pod, fe, pr)
	case err != nil:
		s.log.Warn("scheduling failed", "pod", qp.Key, "err", err)
		s.queue.AddBackoff(qp)
	default:
		s.cache.assume(qp.PodInfo, res.Node)
		s.async(ctx, wg, func() { s.bind(ctx, qp, pod, res.Node) })
	}
}

// bind posts the binding, with the cause of the pod's scheduling as its
// causation. A rejected binding un-assumes the pod: a conflict because the
// pod is bound or gone ends its attempt; an overcommit (our view was
// stale: another replica filled the node) waits until the pod cache has
// read the log up to now, then retries the pod at once.
func (s *Scheduler) bind(ctx context.Context, qp *queue.QueuedPod, pod *corev1.Pod, node string) {
	cctx := consumer.WithCause(ctx, s.cause(qp.Key))
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	err := s.client.CoreV1().Pods(pod.Namespace).Bind(cctx, b, metav1.CreateOptions{})
	switch {
	case err == nil:
		s.stats.scheduled.Add(1)
		s.done(qp.Key)
		s.recorder.scheduled(cctx, pod, node)
		return
	case apierrors.IsConflict(err) && strings.Contains(err.Error(), OvercommitPrefix):
		s.stats.overcommits.Add(1)
		s.cache.forget(qp.Key)
		if werr := s.pods.WaitForLog(ctx); werr != nil {
			s.queue.AddBackoff(qp)
			return
		}
		s.queue.Requeue(qp)
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		s.stats.conflicts.Add(1)
		s.cache.forget(qp.Key)
		s.done(qp.Key)
	default:
		if ctx.Err() == nil {
			s.log.Warn("binding failed", "pod", qp.Key, "node", node, "err", err)
		}
		s.cache.forget(qp.Key)
		s.queue.AddBackoff(qp)
	}
	s.log.Debug("binding refused", "pod", qp.Key, "node", node, "err", err)
}

func (s *Scheduler) done(key string) {
	s.queue.Done(key)
	s.mu.Lock()
	delete(s.causes, key)
	s.mu.Unlock()
}

// unschedulable handles a pod that fit nowhere: with a preemption
// candidate it nominates the node and evicts the victims; it records
// PodScheduled=False with kube's message and a FailedScheduling event, and
// parks the pod until the cluster changes.
func (s *Scheduler) unschedulable(ctx context.Context, wg *sync.WaitGroup, qp *queue.QueuedPod, pod *corev1.Pod, fe *fw.FitError, pr preemption.Result) {
	s.stats.unschedulable.Add(1)
	nominated := pod.Status.NominatedNodeName
	if c := pr.Candidate; c != nil {
		s.stats.preemptions.Add(1)
		s.stats.victims.Add(int64(len(c.Victims)))
		nominated = c.Node
		s.cache.nominate(qp.PodInfo, c.Node)
	} else {
		fe.Diagnosis.PostFilterMsg = pr.Message
	}
	msg := fe.Error()
	cause := s.cause(qp.Key)
	s.queue.AddUnschedulable(qp)
	s.async(ctx, wg, func() {
		cctx := consumer.WithCause(ctx, cause)
		if c := pr.Candidate; c != nil {
			s.evict(cctx, pod, c)
		}
		s.recorder.unschedulable(cctx, pod, msg, nominated)
	})
}

// evict deletes the victims gracefully, as kube-scheduler does (with a
// Preempted event on each, naming the preemptor).
func (s *Scheduler) evict(ctx context.Context, preemptor *corev1.Pod, c *preemption.Candidate) {
	for _, v := range c.Victims {
		pre := metav1.Preconditions{UID: &v.Pod.UID}
		err := s.client.CoreV1().Pods(v.Pod.Namespace).Delete(ctx, v.Pod.Name, metav1.DeleteOptions{Preconditions: &pre})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			s.log.Warn("preemption: delete victim", "victim", v.Key, "err", err)
			continue
		}
		s.recorder.preempted(ctx, v.Pod, preemptor, c.Node)
	}
}
