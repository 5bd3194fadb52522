package cronjob

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/writes"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Name is the controller's name in logs and metrics.
const Name = "cronjob"

// Component is the source of the controller's Events, as kube's.
const Component = "cronjob-controller"

// nextScheduleDelta is added to the wait for the next scheduled time, so
// the round runs just after it (kube's).
const nextScheduleDelta = 100 * time.Millisecond

var (
	cronJobsResource = batchv1.SchemeGroupVersion.WithResource("cronjobs")
	jobsResource     = batchv1.SchemeGroupVersion.WithResource("jobs")
	controllerKind   = batchv1.SchemeGroupVersion.WithKind("CronJob")
	jobKind          = batchv1.SchemeGroupVersion.WithKind("Job")
)

// Options configure the controller.
type Options struct {
	// Workers is the number of CronJobs reconciled at once; 0 means 5
	// (kube's --concurrent-cron-job-syncs).
	Workers int
	// Clock is the time source for schedules; nil is time.Now.
	Clock func() time.Time
	// EventQPS and EventBurst limit the rate of Event writes (see package
	// eventrecord); 0 takes the controller defaults.
	EventQPS   float32
	EventBurst int
}

// Controller is the CronJob controller. Build it with New; its Manager
// runs it.
type Controller struct {
	log      *slog.Logger
	now      func() time.Time
	client   kubernetes.Interface
	cronJobs *consumer.Cache[*batchv1.CronJob]
	jobs     *consumer.Cache[*batchv1.Job]
	recorder *eventrecord.Recorder
	// written is the status writes the CronJob cache has not shown yet.
	written *writes.Tracker
}

// New builds the controller on m's CronJob and Job caches, client and
// recorder.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	log := m.Log().With("controller", Name)
	// Events carry real time: a test clock may stand still.
	recorder, err := eventrecord.ForManager(m, eventrecord.Config{Component: Component, Log: log},
		opts.EventQPS, opts.EventBurst)
	if err != nil {
		return nil, fmt.Errorf("cronjob: new: %w", err)
	}
	cronJobs, err := consumer.CacheFor[*batchv1.CronJob](m, cronJobsResource)
	if err != nil {
		return nil, fmt.Errorf("cronjob: new: %w", err)
	}
	jobs, err := consumer.CacheFor[*batchv1.Job](m, jobsResource)
	if err != nil {
		return nil, fmt.Errorf("cronjob: new: %w", err)
	}
	c := &Controller{log: log, now: opts.Clock, client: m.Client(), cronJobs: cronJobs, jobs: jobs, recorder: recorder,
		written: writes.New()}
	ctrl, err := m.NewController(consumer.ControllerConfig{Name: Name, Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{cronJobs, jobs}})
	if err != nil {
		return nil, fmt.Errorf("cronjob: new: %w", err)
	}
	consumer.For(cronJobs, ctrl, nil)
	consumer.Watch(jobs, ctrl, consumer.OwnerKeys[*batchv1.Job](controllerKind.Kind))
	return c, nil
}

var _ consumer.Reconciler = (*Controller)(nil)

// Reconcile runs one round of kube's sync for the CronJob req.Key.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	cj, ok := c.cronJobs.Get(ns, name)
	if !ok {
		c.written.Forget(req.Key)
		return consumer.Result{}, nil
	}
	if !c.written.Seen(req.Key, cj.ResourceVersion) {
		// Its event queues the CronJob again; the requeue is for a lost one.
		return consumer.Result{RequeueAfter: time.Second}, nil
	}
	jobs := c.jobsOf(cj)
	cj = cj.DeepCopy()
	cleaned := c.cleanupFinishedJobs(ctx, cj, jobs)
	requeue, updated, syncErr := c.syncCronJob(ctx, cj, jobs)
	if cleaned || updated {
		out, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cj, metav1.UpdateOptions{})
		if err != nil {
			return consumer.Result{}, fmt.Errorf("cronjob: %s: update status: %w", req.Key, err)
		}
		c.written.Wrote(req.Key, out.ResourceVersion)
	}
	if requeue != nil {
		return consumer.Result{RequeueAfter: max(*requeue, time.Millisecond)}, nil
	}
	return consumer.Result{}, syncErr
}

// jobsOf is the Jobs the CronJob controls.
func (c *Controller) jobsOf(cj *batchv1.CronJob) []*batchv1.Job {
	var out []*batchv1.Job
	for _, j := range c.jobs.ByIndex(consumer.IndexOwner, string(cj.UID)) {
		if j.Namespace == cj.Namespace {
			out = append(out, j)
		}
	}
	return out
}

func (c *Controller) event(ctx context.Context, cj *batchv1.CronJob, typ, reason, msg string) {
	c.recorder.Event(ctx, eventrecord.Ref(cj, controllerKind), typ, reason, "", msg)
}

func (c *Controller) eventf(ctx context.Context, cj *batchv1.CronJob, typ, reason, format string, args ...any) {
	c.event(ctx, cj, typ, reason, fmt.Sprintf(format, args...))
}

// finishedCondition is the Job's true Complete or Failed condition type.
func finishedCondition(j *batchv1.Job) (batchv1.JobConditionType, bool) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type, true
		}
	}
	return "", false
}

func isJobFinished(j *batchv1.Job) bool {
	_, ok := finishedCondition(j)
	return ok
}

func isJobSucceeded(j *batchv1.Job) bool {
	t, ok := finishedCondition(j)
	return ok && t == batchv1.JobComplete
}
