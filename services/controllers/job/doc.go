// Package job is the Job controller (batch/v1), a port of kube's
// pkg/controller/job onto the consumer runtime.
//
// # What it does
//
// For every Job it keeps up to parallelism pods running until completions
// pods succeeded (or, without completions, until one succeeded and the rest
// finished), then sets the Complete condition; it fails the Job with
// Failed when more pods failed than backoffLimit (BackoffLimitExceeded),
// when the Job ran longer than activeDeadlineSeconds (DeadlineExceeded),
// when a podFailurePolicy FailJob rule matched (PodFailurePolicy), or, for
// Indexed Jobs with backoffLimitPerIndex, when indexes failed
// (FailedIndexes, MaxFailedIndexesExceeded). A successPolicy can declare
// an Indexed Job complete early (SuccessPolicy). As kube with JobManagedBy
// and JobPodReplacementPolicy on (their default), the terminal condition is
// preceded by its interim one (SuccessCriteriaMet, FailureTarget) and is
// set only once no pod of the Job is left terminating.
//
// # Exact accounting
//
// Every pod is created with the finalizer batch.kubernetes.io/job-tracking.
// A finished pod is first written to status.uncountedTerminatedPods, then
// its finalizer is removed, then it moves from the uncounted lists to
// status.succeeded or status.failed (trackStatus): a pod is counted once,
// even across restarts and replicas, because every status write is an
// update at the Job's resourceVersion. Removals the cache has not shown
// yet are remembered (finalizerExpectations) so a stale pod is not counted
// twice.
//
// # Back-off
//
// A failed pod is replaced after 10s, doubled for each further failure in
// a row, capped at 6 minutes (backoffRecord, kube's backoff_utils.go); the
// record lives in memory, as kube's does. Indexed Jobs with
// backoffLimitPerIndex back off per index from the failure count in the
// batch.kubernetes.io/job-index-failure-count annotation.
//
// # Scale-out
//
// Jobs are keys of the controller-manager's shard; the pods of a Job share
// its partition, so a replica's pod cache holds only the pods of its own
// Jobs. Writes made inside Reconcile carry the cause of the event that
// queued the Job.
package job
