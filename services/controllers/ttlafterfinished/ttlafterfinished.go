package ttlafterfinished

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
)

// Name is the controller's name in logs and metrics.
const Name = "ttlafterfinished"

var jobsResource = batchv1.SchemeGroupVersion.WithResource("jobs")

// errNoFinishTime: a finished Job's condition has no transition time.
var errNoFinishTime = errors.New("ttlafterfinished: finished condition without lastTransitionTime")

// Options configure the controller.
type Options struct {
	// Workers is the number of Jobs handled at once; 0 means 5 (kube's
	// --concurrent-ttl-after-finished-syncs).
	Workers int
	// Clock is the time source; nil is time.Now.
	Clock func() time.Time
}

// Controller is the TTL-after-finished controller. Build it with New; its
// Manager runs it.
type Controller struct {
	log    *slog.Logger
	now    func() time.Time
	client kubernetes.Interface
	jobs   *consumer.Cache[*batchv1.Job]
}

// New builds the controller on m's Job cache and client.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	jobs, err := consumer.CacheFor[*batchv1.Job](m, jobsResource)
	if err != nil {
		return nil, fmt.Errorf("ttlafterfinished: new: %w", err)
	}
	c := &Controller{log: m.Log().With("controller", Name), now: opts.Clock, client: m.Client(), jobs: jobs}
	ctrl, err := m.NewController(consumer.ControllerConfig{Name: Name, Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{jobs}})
	if err != nil {
		return nil, fmt.Errorf("ttlafterfinished: new: %w", err)
	}
	consumer.For(jobs, ctrl, func(j *batchv1.Job) []string {
		if !needsCleanup(j) {
			return nil
		}
		return []string{consumer.KeyOf(j)}
	})
	return c, nil
}

var _ consumer.Reconciler = (*Controller)(nil)

// Reconcile deletes the Job req.Key if its TTL expired, or asks to be
// called again when it will (kube's processJob).
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	job, ok := c.jobs.Get(ns, name)
	if !ok || !needsCleanup(job) {
		return consumer.Result{}, nil
	}
	expireAt, wait, err := c.processTTL(job)
	if err != nil || expireAt == nil {
		return consumer.Result{RequeueAfter: wait}, err
	}
	// The cached TTL may be stale: check the Job as the apiserver has it.
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return consumer.Result{}, nil
	}
	if err != nil {
		return consumer.Result{}, fmt.Errorf("ttlafterfinished: %s: %w", req.Key, err)
	}
	if !needsCleanup(fresh) {
		return consumer.Result{}, nil
	}
	if expireAt, wait, err = c.processTTL(fresh); err != nil || expireAt == nil {
		return consumer.Result{RequeueAfter: wait}, err
	}
	policy := metav1.DeletePropagationForeground
	c.log.Info("cleaning up job", "key", req.Key)
	err = c.client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &fresh.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return consumer.Result{}, fmt.Errorf("ttlafterfinished: delete %s: %w", req.Key, err)
	}
	return consumer.Result{}, nil
}

// processTTL returns the expiry if it passed, or else how long until it.
func (c *Controller) processTTL(job *batchv1.Job) (expireAt *time.Time, wait time.Duration, err error) {
	finishAt, err := jobFinishTime(job)
	if err != nil {
		return nil, 0, consumer.TerminalError(err)
	}
	at := finishAt.Add(time.Duration(*job.Spec.TTLSecondsAfterFinished) * time.Second)
	now := c.now()
	if !now.Before(at) {
		return &at, 0, nil
	}
	return nil, at.Sub(now), nil
}

// needsCleanup: the Job has a TTL and finished.
func needsCleanup(j *batchv1.Job) bool {
	if j.Spec.TTLSecondsAfterFinished == nil || j.DeletionTimestamp != nil {
		return false
	}
	_, err := jobFinishTime(j)
	return err == nil || errors.Is(err, errNoFinishTime)
}

var errNotFinished = errors.New("ttlafterfinished: job not finished")

// jobFinishTime is the transition time of the Job's true Complete or
// Failed condition.
func jobFinishTime(j *batchv1.Job) (time.Time, error) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			if c.LastTransitionTime.IsZero() {
				return time.Time{}, fmt.Errorf("job %s/%s: %w", j.Namespace, j.Name, errNoFinishTime)
			}
			return c.LastTransitionTime.Time, nil
		}
	}
	return time.Time{}, errNotFinished
}
