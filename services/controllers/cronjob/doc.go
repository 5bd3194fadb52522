// Package cronjob is the CronJob controller (batch/v1), a port of kube's
// pkg/controller/cronjob (cronjob_controllerv2.go and utils.go) onto the
// consumer runtime.
//
// For every CronJob it works out the most recent scheduled time not yet
// run (robfig/cron/v3, in spec.timeZone), skips it when it is later than
// startingDeadlineSeconds (MissSchedule), when the CronJob is suspended,
// or when concurrencyPolicy Forbid finds a Job still active; Replace
// deletes the active Jobs first. The Job is named NAME-<scheduled time in
// minutes since the epoch> and carries the
// batch.kubernetes.io/cronjob-scheduled-timestamp annotation. Then it
// records the Job in status.active and lastScheduleTime, keeps
// lastSuccessfulTime, deletes the oldest finished Jobs past
// successfulJobsHistoryLimit and failedJobsHistoryLimit, and asks to run
// again at the next scheduled time.
//
// # Each scheduled time fires once
//
// The Job's name is a function of the CronJob and the scheduled time, so
// the apiserver refuses a second Job for the same time (AlreadyExists):
// two replicas racing (a takeover, a restart after the create and before
// the status write) create one Job between them, and the loser adopts it
// into status.active. Status writes are updates at the CronJob's
// resourceVersion, so a replica with a stale view conflicts and retries.
//
// CronJobs are keys of the controller-manager's shard; the Job cache holds
// every Job. Writes carry the cause of the event that queued the CronJob
// (so a CronJob -> Job -> Pod chain shows on the timeline); a round queued
// by the clock has no event and starts a chain of its own.
package cronjob
