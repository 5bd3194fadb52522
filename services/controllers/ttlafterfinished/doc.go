// Package ttlafterfinished is the TTL-after-finished controller, a port of
// kube's pkg/controller/ttlafterfinished: a Job with
// spec.ttlSecondsAfterFinished is deleted (foreground propagation, with a
// UID precondition, as kube's) that many seconds after its Complete or
// Failed condition became true. Before deleting, it reads the Job again
// from the apiserver and checks the TTL on the fresh copy, so a TTL that a
// user just changed is honoured. Jobs are keys of the controller-manager's
// shard; the delete carries the cause of the event that queued the Job.
package ttlafterfinished
