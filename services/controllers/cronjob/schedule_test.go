package cronjob

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Ported from kube's TestMostRecentScheduleTime (utils_test.go): missed
// schedules with and without startingDeadlineSeconds, irregular
// schedules, @every, and an impossible date.
func TestMostRecentScheduleTime(t *testing.T) {
	created := mustTime("2016-05-19T10:00:00Z")
	tests := []struct {
		name           string
		schedule       string
		lastSchedule   *time.Time
		deadline       *int64
		now            time.Time
		includeDL      bool
		wantEarliest   time.Time
		wantMostRecent *time.Time
		wantMissed     missedSchedules
		wantErr        bool
	}{
		{name: "before the first schedule", schedule: "0 * * * *", now: mustTime("2016-05-19T10:30:00Z"),
			wantEarliest: created},
		{name: "one schedule passed", schedule: "0 * * * *", now: mustTime("2016-05-19T11:30:00Z"),
			wantEarliest: created, wantMostRecent: ptr(mustTime("2016-05-19T11:00:00Z"))},
		{name: "two schedules missed", schedule: "0 * * * *", now: mustTime("2016-05-19T12:30:00Z"),
			wantEarliest: created, wantMostRecent: ptr(mustTime("2016-05-19T12:00:00Z")), wantMissed: fewMissed},
		{name: "from the last scheduled time", schedule: "0 * * * *", lastSchedule: ptr(mustTime("2016-05-19T12:00:00Z")),
			now: mustTime("2016-05-19T12:30:00Z"), wantEarliest: mustTime("2016-05-19T12:00:00Z")},
		{name: "many missed", schedule: "* * * * *", now: mustTime("2016-05-19T12:00:00Z"),
			wantEarliest: created, wantMostRecent: ptr(mustTime("2016-05-19T12:00:00Z")), wantMissed: manyMissed},
		{name: "deadline hides old misses", schedule: "0 * * * *", deadline: ptr[int64](600), includeDL: true,
			now: mustTime("2016-05-19T14:05:00Z"), wantEarliest: mustTime("2016-05-19T13:55:00Z"), wantMostRecent: ptr(mustTime("2016-05-19T14:00:00Z"))},
		{name: "deadline passed: nothing to run", schedule: "0 * * * *", deadline: ptr[int64](60), includeDL: true,
			now: mustTime("2016-05-19T14:05:00Z"), wantEarliest: mustTime("2016-05-19T14:04:00Z")},
		{name: "deadline ignored for the requeue", schedule: "0 * * * *", deadline: ptr[int64](60),
			now: mustTime("2016-05-19T14:05:00Z"), wantEarliest: created, wantMostRecent: ptr(mustTime("2016-05-19T14:00:00Z")), wantMissed: fewMissed},
		{name: "irregular schedule", schedule: "30 6-16/4 * * 1-5", now: mustTime("2016-05-23T14:00:00Z"),
			wantEarliest: created, wantMostRecent: ptr(mustTime("2016-05-23T10:30:00Z")), wantMissed: fewMissed},
		{name: "@every", schedule: "@every 1h", now: mustTime("2016-05-19T13:30:00Z"),
			wantEarliest: created, wantMostRecent: ptr(mustTime("2016-05-19T13:00:00Z")), wantMissed: fewMissed},
		{name: "impossible date", schedule: "59 23 31 2 *", now: mustTime("2016-05-19T13:30:00Z"),
			wantEarliest: created, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sched, err := cron.ParseStandard(tt.schedule)
			if err != nil {
				t.Fatal(err)
			}
			cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
				Spec: batchv1.CronJobSpec{Schedule: tt.schedule, StartingDeadlineSeconds: tt.deadline}}
			if tt.lastSchedule != nil {
				cj.Status.LastScheduleTime = &metav1.Time{Time: *tt.lastSchedule}
			}
			earliest, mostRecent, missed, err := mostRecentScheduleTime(cj, tt.now, sched, tt.includeDL)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if !earliest.Equal(tt.wantEarliest) {
				t.Errorf("earliest %v, want %v", earliest, tt.wantEarliest)
			}
			if (mostRecent == nil) != (tt.wantMostRecent == nil) || mostRecent != nil && !mostRecent.Equal(*tt.wantMostRecent) {
				t.Errorf("most recent %v, want %v", mostRecent, tt.wantMostRecent)
			}
			if missed != tt.wantMissed {
				t.Errorf("missed %v, want %v", missed, tt.wantMissed)
			}
		})
	}
}

// Ported from kube's TestNextScheduleTimeDuration: the requeue lands just
// after the next scheduled time.
func TestNextScheduleTimeDuration(t *testing.T) {
	created := mustTime("2016-05-19T10:00:00Z")
	tests := []struct {
		name     string
		schedule string
		last     *time.Time
		now      time.Time
		want     time.Duration
	}{
		{"next hour", "0 * * * *", nil, mustTime("2016-05-19T10:30:00Z"), 30*time.Minute + nextScheduleDelta},
		{"missed one, next from the most recent", "0 * * * *", nil, mustTime("2016-05-19T11:40:00Z"), 20*time.Minute + nextScheduleDelta},
		{"after the last scheduled", "*/15 * * * *", ptr(mustTime("2016-05-19T10:15:00Z")), mustTime("2016-05-19T10:20:00Z"), 10*time.Minute + nextScheduleDelta},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sched, _ := cron.ParseStandard(tt.schedule)
			cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
			if tt.last != nil {
				cj.Status.LastScheduleTime = &metav1.Time{Time: *tt.last}
			}
			if got := *nextScheduleTimeDuration(cj, tt.now, sched); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// The Job of a scheduled time: NAME-<minutes>, the scheduled-timestamp
// annotation in the CronJob's zone, the template's labels and
// annotations, and the CronJob as controller.
func TestGetJobFromTemplate(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "cj-uid"},
		Spec: batchv1.CronJobSpec{TimeZone: ptr("Europe/Paris"), JobTemplate: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"x": "y"}},
			Spec:       batchv1.JobSpec{Parallelism: ptr[int32](3)}}}}
	at := mustTime("2026-01-02T03:04:00Z")
	j := getJobFromTemplate(cj, at, loc)
	if j.Name != "nightly-29455384" {
		t.Errorf("name %q, want nightly-29455384 (minutes since the epoch)", j.Name)
	}
	if got := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != "2026-01-02T04:04:00+01:00" {
		t.Errorf("scheduled timestamp %q", got)
	}
	if j.Labels["a"] != "b" || j.Annotations["x"] != "y" || *j.Spec.Parallelism != 3 {
		t.Errorf("template not copied: %+v", j)
	}
	if ref := metav1.GetControllerOf(j); ref == nil || ref.UID != "cj-uid" || ref.Kind != "CronJob" {
		t.Errorf("controller %+v", ref)
	}
	if cj.Spec.JobTemplate.Annotations[batchv1.CronJobScheduledTimestampAnnotation] != "" {
		t.Error("the template was modified")
	}
}
