package job

import (
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// backoffRecord is how many pods of a Job failed since its last success,
// and when the last of them did (kube's backoffRecord).
type backoffRecord struct {
	failuresAfterLastSuccess int32
	lastFailureTime          *time.Time
}

// backoffStore holds a backoffRecord per Job key, in memory as kube's.
type backoffStore struct {
	mu sync.Mutex
	m  map[string]backoffRecord
}

func newBackoffStore() *backoffStore { return &backoffStore{m: map[string]backoffRecord{}} }

func (s *backoffStore) update(key string, r backoffRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = r
}

func (s *backoffStore) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// newRecord is the record of key after the newly finished pods.
func (s *backoffStore) newRecord(key string, succeeded, failed []*corev1.Pod) backoffRecord {
	s.mu.Lock()
	b := s.m[key]
	s.mu.Unlock()
	return nextBackoffRecord(b, succeeded, failed)
}

func nextBackoffRecord(b backoffRecord, succeeded, failed []*corev1.Pod) backoffRecord {
	sortByFinishedTime(succeeded)
	sortByFinishedTime(failed)
	if len(succeeded) == 0 {
		if len(failed) == 0 {
			return b
		}
		b.failuresAfterLastSuccess += int32(len(failed))
		t := getFinishedTime(failed[len(failed)-1])
		b.lastFailureTime = &t
		return b
	}
	b = backoffRecord{}
	lastSuccess := getFinishedTime(succeeded[len(succeeded)-1])
	for i := len(failed) - 1; i >= 0; i-- {
		t := getFinishedTime(failed[i])
		if !t.After(lastSuccess) {
			break
		}
		if b.lastFailureTime == nil {
			b.lastFailureTime = &t
		}
		b.failuresAfterLastSuccess++
	}
	return b
}

func sortByFinishedTime(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return getFinishedTime(pods[i]).Before(getFinishedTime(pods[j])) })
}

// getFinishedTime is when a pod finished: its containers' last finish, or
// its Ready=False transition, or its deletion less the grace period, or
// its creation, in that order (kube's getFinishedTime).
func getFinishedTime(p *corev1.Pod) time.Time {
	if t := finishTimeFromContainers(p); t != nil {
		return *t
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if p.DeletionTimestamp != nil {
		var grace int64
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		return p.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
	}
	return p.CreationTimestamp.Time
}

func finishTimeFromContainers(p *corev1.Pod) *time.Time {
	t := latestFinishTime(nil, p.Status.ContainerStatuses, nil)
	// Sidecars (restartable init containers) finish after the others.
	sidecars := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	return latestFinishTime(t, p.Status.InitContainerStatuses, func(cs corev1.ContainerStatus) bool { return sidecars[cs.Name] })
}

func latestFinishTime(prev *time.Time, statuses []corev1.ContainerStatus, check func(corev1.ContainerStatus) bool) *time.Time {
	t := prev
	for _, cs := range statuses {
		if check != nil && !check(cs) {
			continue
		}
		if cs.State.Terminated == nil || cs.State.Terminated.FinishedAt.IsZero() {
			return nil
		}
		if t == nil || t.Before(cs.State.Terminated.FinishedAt.Time) {
			ft := cs.State.Terminated.FinishedAt.Time
			t = &ft
		}
	}
	return t
}

// remainingTime is how long the Job must still wait before it replaces a
// failed pod.
func (b backoffRecord) remainingTime(now time.Time) time.Duration {
	return remainingTimeForFailures(now, DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff, b.failuresAfterLastSuccess, b.lastFailureTime)
}

// remainingTimePerIndex is remainingTime for one index of a Job with
// backoffLimitPerIndex, from the last failed pod of the index.
func remainingTimePerIndex(c *Controller, lastFailed *corev1.Pod) time.Duration {
	if lastFailed == nil {
		return 0
	}
	n := getIndexAbsoluteFailureCount(c.log, lastFailed) + 1
	t := getFinishedTime(lastFailed)
	return remainingTimeForFailures(c.now(), DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff, n, &t)
}

// remainingTimeForFailures: the back-off after n failures is base doubled
// n-1 times, capped at max; what is left of it since the last failure.
func remainingTimeForFailures(now time.Time, base, maxBackoff time.Duration, n int32, last *time.Time) time.Duration {
	if n == 0 || last == nil {
		return 0
	}
	d := base
	for i := 1; i < int(n); i++ {
		d *= 2
		if d >= maxBackoff {
			d = maxBackoff
			break
		}
	}
	elapsed := now.Sub(*last)
	if d < elapsed {
		return 0
	}
	return d - elapsed
}
