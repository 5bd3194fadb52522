package cronjob

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// syncCronJob is kube's syncCronJob: it updates status.active from the
// Jobs, then creates the Job of the most recent unmet scheduled time if it
// should. It returns when to run again, whether the status changed, and an
// error to retry.
func (c *Controller) syncCronJob(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) (*time.Duration, bool, error) {
	now := c.now()
	updateStatus := false
	children := map[types.UID]bool{}
	for _, j := range jobs {
		children[j.UID] = true
		found := inActiveList(cj, j.UID)
		switch {
		case !found && !isJobFinished(j):
			fresh, err := c.client.BatchV1().CronJobs(cj.Namespace).Get(ctx, cj.Name, metav1.GetOptions{})
			if err != nil {
				return nil, updateStatus, err
			}
			if inActiveList(fresh, j.UID) {
				*cj = *fresh
				continue
			}
			c.eventf(ctx, cj, corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
			// kube leaves such a Job out of status.active. A Job of a
			// scheduled time is one a replica made and whose status write
			// was lost (a conflict with another replica, a kill): it is
			// tracked again, so Forbid and Replace see it. One a user made
			// (create job --from) stays out, as in kube.
			if _, scheduled := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; scheduled {
				cj.Status.Active = append(cj.Status.Active, jobRef(j))
				updateStatus = true
			}
		case found && isJobFinished(j):
			cond, _ := finishedCondition(j)
			deleteFromActiveList(cj, j.UID)
			c.eventf(ctx, cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, cond)
			updateStatus = true
		}
		if isJobSucceeded(j) && j.Status.CompletionTime != nil &&
			(cj.Status.LastSuccessfulTime == nil || j.Status.CompletionTime.After(cj.Status.LastSuccessfulTime.Time)) {
			cj.Status.LastSuccessfulTime = j.Status.CompletionTime
			updateStatus = true
		}
	}
	// Jobs in status.active that the cache does not show: gone, or not
	// seen yet. Ask the apiserver.
	for _, ref := range append([]corev1.ObjectReference(nil), cj.Status.Active...) {
		if children[ref.UID] {
			continue
		}
		_, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			c.eventf(ctx, cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", ref.Name)
			deleteFromActiveList(cj, ref.UID)
			updateStatus = true
		case err != nil:
			return nil, updateStatus, err
		}
	}
	if cj.DeletionTimestamp != nil {
		return nil, updateStatus, nil
	}
	loc := time.UTC
	if cj.Spec.TimeZone != nil {
		l, err := time.LoadLocation(*cj.Spec.TimeZone)
		if err != nil {
			c.eventf(ctx, cj, corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *cj.Spec.TimeZone, err)
			return nil, updateStatus, nil
		}
		loc = l
	}
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		return nil, updateStatus, nil
	}
	sched, err := cron.ParseStandard(c.formatSchedule(ctx, cj))
	if err != nil {
		c.eventf(ctx, cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return nil, updateStatus, nil
	}
	scheduledTime, err := c.nextScheduleTime(ctx, cj, now, sched)
	if err != nil {
		c.eventf(ctx, cj, corev1.EventTypeWarning, "InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err)
		return nil, updateStatus, nil
	}
	if scheduledTime == nil {
		return nextScheduleTimeDuration(cj, now, sched), updateStatus, nil
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduledTime.Add(time.Duration(*d)*time.Second).Before(now) {
		c.eventf(ctx, cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduledTime.UTC().Format(time.RFC1123Z))
		return nextScheduleTimeDuration(cj, now, sched), updateStatus, nil
	}
	if inActiveListByName(cj, getJobName(cj, *scheduledTime)) ||
		cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(*scheduledTime) {
		// Already run.
		return nextScheduleTimeDuration(cj, now, sched), updateStatus, nil
	}
	if cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent && len(cj.Status.Active) > 0 {
		c.event(ctx, cj, corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
		return nextScheduleTimeDuration(cj, now, sched), updateStatus, nil
	}
	if cj.Spec.ConcurrencyPolicy == batchv1.ReplaceConcurrent {
		for _, ref := range append([]corev1.ObjectReference(nil), cj.Status.Active...) {
			j, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				c.eventf(ctx, cj, corev1.EventTypeWarning, "FailedGet", "Get job: %v", err)
				return nil, updateStatus, err
			}
			if !c.deleteJob(ctx, cj, j) {
				return nil, updateStatus, fmt.Errorf("cronjob: could not replace job %s/%s", j.Namespace, j.Name)
			}
			updateStatus = true
		}
	}
	want := getJobFromTemplate(cj, *scheduledTime, loc)
	created, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, want, metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, updateStatus, err
	case apierrors.IsAlreadyExists(err):
		// Another round (this replica's or another's) made it: adopt it into
		// the status unless it is there already or not ours.
		c.log.Info("job already exists", "cronjob", cj.Namespace+"/"+cj.Name, "job", want.Name)
		j, err := c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return nil, updateStatus, err
		}
		if !metav1.IsControlledBy(j, cj) || inActiveList(cj, j.UID) {
			return nil, updateStatus, nil
		}
		created = j
	case err != nil:
		c.eventf(ctx, cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return nil, updateStatus, err
	default:
		c.eventf(ctx, cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", created.Name)
	}
	cj.Status.Active = append(cj.Status.Active, jobRef(created))
	cj.Status.LastScheduleTime = &metav1.Time{Time: *scheduledTime}
	return nextScheduleTimeDuration(cj, now, sched), true, nil
}

// formatSchedule prefixes the schedule with the CronJob's time zone.
func (c *Controller) formatSchedule(ctx context.Context, cj *batchv1.CronJob) string {
	if hasTZ(cj.Spec.Schedule) {
		c.eventf(ctx, cj, corev1.EventTypeWarning, "UnsupportedSchedule",
			"CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", cj.Spec.Schedule)
		return cj.Spec.Schedule
	}
	if cj.Spec.TimeZone != nil {
		return fmt.Sprintf("TZ=%s %s", *cj.Spec.TimeZone, cj.Spec.Schedule)
	}
	return cj.Spec.Schedule
}

func hasTZ(s string) bool {
	return len(s) >= 3 && s[:3] == "TZ=" || len(s) >= 8 && s[:8] == "CRON_TZ="
}

// cleanupFinishedJobs deletes the oldest finished Jobs beyond the history
// limits; it reports whether the status changed.
func (c *Controller) cleanupFinishedJobs(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) bool {
	if cj.Spec.FailedJobsHistoryLimit == nil && cj.Spec.SuccessfulJobsHistoryLimit == nil {
		return false
	}
	var succeeded, failed []*batchv1.Job
	for _, j := range jobs {
		switch t, ok := finishedCondition(j); {
		case ok && t == batchv1.JobComplete:
			succeeded = append(succeeded, j)
		case ok && t == batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	updated := false
	if l := cj.Spec.SuccessfulJobsHistoryLimit; l != nil && c.removeOldestJobs(ctx, cj, succeeded, *l) {
		updated = true
	}
	if l := cj.Spec.FailedJobsHistoryLimit; l != nil && c.removeOldestJobs(ctx, cj, failed, *l) {
		updated = true
	}
	return updated
}

func (c *Controller) removeOldestJobs(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job, limit int32) bool {
	n := len(jobs) - int(limit)
	if n <= 0 {
		return false
	}
	sortByStartTime(jobs)
	updated := false
	for _, j := range jobs[:n] {
		if c.deleteJob(ctx, cj, j) {
			updated = true
		}
	}
	return updated
}

// sortByStartTime orders Jobs by status.startTime (those without last),
// then by name.
func sortByStartTime(jobs []*batchv1.Job) {
	sort.SliceStable(jobs, func(i, j int) bool {
		a, b := jobs[i], jobs[j]
		if b.Status.StartTime == nil {
			return a.Status.StartTime != nil
		}
		if a.Status.StartTime == nil {
			return false
		}
		if a.Status.StartTime.Equal(b.Status.StartTime) {
			return a.Name < b.Name
		}
		return a.Status.StartTime.Before(b.Status.StartTime)
	})
}

// deleteJob deletes j with its pods (background propagation, as kube's
// jobControl) and drops it from status.active.
func (c *Controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, j *batchv1.Job) bool {
	policy := metav1.DeletePropagationBackground
	err := c.client.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &policy})
	if err != nil && !apierrors.IsNotFound(err) {
		c.eventf(ctx, cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		return false
	}
	deleteFromActiveList(cj, j.UID)
	c.eventf(ctx, cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", j.Name)
	return true
}

func jobRef(j *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: jobKind.Kind, APIVersion: jobKind.GroupVersion().String(),
		Namespace: j.Namespace, Name: j.Name, UID: j.UID, ResourceVersion: j.ResourceVersion}
}

func inActiveList(cj *batchv1.CronJob, uid types.UID) bool {
	for _, r := range cj.Status.Active {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func inActiveListByName(cj *batchv1.CronJob, name string) bool {
	for _, r := range cj.Status.Active {
		if r.Name == name && r.Namespace == cj.Namespace {
			return true
		}
	}
	return false
}

func deleteFromActiveList(cj *batchv1.CronJob, uid types.UID) {
	out := []corev1.ObjectReference{}
	for _, r := range cj.Status.Active {
		if r.UID != uid {
			out = append(out, r)
		}
	}
	cj.Status.Active = out
}

var errTooClose = errors.New("time difference between two schedules is less than 1 second")
