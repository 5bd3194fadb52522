package cronjob

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// missedSchedules says how many scheduled times passed unmet.
type missedSchedules int

const (
	noneMissed missedSchedules = iota
	fewMissed
	manyMissed // more than 100
)

// mostRecentScheduleTime is kube's: from the last scheduled time (or the
// CronJob's creation, or now less startingDeadlineSeconds when that is
// later and includeDeadline), the earliest time considered, the most
// recent scheduled time not after now (nil if none), and how many were
// missed. The count is an estimate from the interval of the first two
// times, so it costs O(1) however long the controller was away.
func mostRecentScheduleTime(cj *batchv1.CronJob, now time.Time, schedule cron.Schedule, includeDeadline bool) (time.Time, *time.Time, missedSchedules, error) {
	earliest := cj.CreationTimestamp.Time
	missed := noneMissed
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if includeDeadline && cj.Spec.StartingDeadlineSeconds != nil {
		deadline := now.Add(-time.Duration(*cj.Spec.StartingDeadlineSeconds) * time.Second)
		if deadline.After(earliest) {
			earliest = deadline
		}
	}
	t1 := schedule.Next(earliest)
	t2 := schedule.Next(t1)
	if now.Before(t1) {
		return earliest, nil, missed, nil
	}
	if now.Before(t2) {
		return earliest, &t1, missed, nil
	}
	// An impossible schedule (Feb 31) has no next time: zero interval.
	between := int64(t2.Sub(t1).Round(time.Second).Seconds())
	if between < 1 {
		return earliest, nil, missed, errTooClose
	}
	elapsed := int64(now.Sub(t1).Seconds())
	n := elapsed/between + 1
	var mostRecent time.Time
	// Start one interval before the estimate, so irregular schedules
	// (30 6-16/4 * * 1-5) and @every land on their real times.
	potentialEarliest := t1.Add(time.Duration((n-1-1)*between) * time.Second)
	for t := schedule.Next(potentialEarliest); !t.After(now); t = schedule.Next(t) {
		mostRecent = t
	}
	switch {
	case n > 100:
		missed = manyMissed
	case n > 0:
		missed = fewMissed
	}
	if mostRecent.IsZero() {
		return earliest, nil, missed, nil
	}
	return earliest, &mostRecent, missed, nil
}

// nextScheduleTime is the scheduled time to run now, or nil.
func (c *Controller) nextScheduleTime(ctx context.Context, cj *batchv1.CronJob, now time.Time, schedule cron.Schedule) (*time.Time, error) {
	_, mostRecent, missed, err := mostRecentScheduleTime(cj, now, schedule, true)
	if mostRecent == nil || mostRecent.After(now) {
		return nil, err
	}
	if missed == manyMissed {
		c.event(ctx, cj, corev1.EventTypeWarning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
		c.log.Info("too many missed times", "cronjob", cj.Namespace+"/"+cj.Name)
	}
	return mostRecent, err
}

// nextScheduleTimeDuration is how long until just after the next scheduled
// time.
func nextScheduleTimeDuration(cj *batchv1.CronJob, now time.Time, schedule cron.Schedule) *time.Duration {
	earliest, mostRecent, missed, err := mostRecentScheduleTime(cj, now, schedule, false)
	switch {
	case err != nil:
		mostRecent = &now
	case mostRecent == nil && missed == noneMissed:
		mostRecent = &earliest
	case mostRecent == nil:
		mostRecent = &now
	}
	d := schedule.Next(*mostRecent).Add(nextScheduleDelta).Sub(now)
	return &d
}

// getJobName is NAME-<scheduled time in minutes since the epoch>: the
// same for every round that handles that time.
func getJobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

// getJobFromTemplate is the Job of the scheduled time (kube's
// getJobFromTemplate2).
func getJobFromTemplate(cj *batchv1.CronJob, scheduled time.Time, loc *time.Location) *batchv1.Job {
	labels := map[string]string{}
	for k, v := range cj.Spec.JobTemplate.Labels {
		labels[k] = v
	}
	annotations := map[string]string{}
	for k, v := range cj.Spec.JobTemplate.Annotations {
		annotations[k] = v
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Labels: labels, Annotations: annotations, Name: getJobName(cj, scheduled),
			Namespace:         cj.Namespace,
			CreationTimestamp: metav1.Time{Time: scheduled},
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(cj, controllerKind)},
		},
	}
	cj.Spec.JobTemplate.Spec.DeepCopyInto(&job.Spec)
	return job
}
