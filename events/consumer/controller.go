package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/supervisor"
)

// Request is one unit of work: reconcile the object with this key.
type Request struct {
	// Key is "namespace/name", or "name" for a cluster-scoped object.
	Key string
	// Cause is the event that last queued the key; zero when the key was
	// queued by a snapshot or a requeue with no newer event.
	Cause Cause
}

// NamespaceName splits the key.
func (r Request) NamespaceName() (namespace, name string) { return SplitKey(r.Key) }

// Result tells the controller what to do after a successful Reconcile.
type Result struct {
	// RequeueAfter > 0 queues the key again after that long (polling,
	// waiting for a deadline); the key's back-off is reset either way.
	RequeueAfter time.Duration
}

// Reconciler drives the world towards the state the objects describe.
//
// Reconcile is level-triggered: it reads the current state (from caches)
// for req.Key and acts on that, not on what changed; it must be idempotent,
// because a key is reconciled again after every change, every restart and
// every failure. It is never called for the same key from two goroutines at
// once. The rules on return:
//
//   - nil error: done; Result.RequeueAfter > 0 asks for another round.
//   - an error: logged and retried with the key's back-off (exponential).
//   - TerminalError(err): logged, not retried until the key is queued
//     again by a new event.
//
// The ctx carries req.Cause (WithCause): writes made with it through a
// client from WrapConfig are linked to the triggering event.
type Reconciler interface {
	Reconcile(ctx context.Context, req Request) (Result, error)
}

// ReconcilerFunc adapts a function to Reconciler.
type ReconcilerFunc func(ctx context.Context, req Request) (Result, error)

// Reconcile calls f.
func (f ReconcilerFunc) Reconcile(ctx context.Context, req Request) (Result, error) {
	return f(ctx, req)
}

// terminalError marks an error that retrying will not fix.
type terminalError struct{ err error }

func (e *terminalError) Error() string { return "terminal error: " + e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// TerminalError wraps err so the controller does not retry it. errors.Is
// and errors.As see through it to err.
func TerminalError(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err (or anything it wraps) is a TerminalError.
func IsTerminal(err error) bool {
	var t *terminalError
	return errors.As(err, &t)
}

// expectedError marks a failure that is part of normal operation.
type expectedError struct{ err error }

func (e *expectedError) Error() string { return e.err.Error() }
func (e *expectedError) Unwrap() error { return e.err }

// ExpectedError wraps err, a failure that is part of normal operation (a
// cache that has not yet seen the controller's own last write): the key is
// retried with back-off as for any error, but the retry is logged at info,
// as kube's controllers log theirs, not as a warning on the operator's
// terminal. errors.Is and errors.As see through it to err.
func ExpectedError(err error) error {
	if err == nil {
		return nil
	}
	return &expectedError{err: err}
}

// IsExpected reports whether err (or anything it wraps) is an
// ExpectedError.
func IsExpected(err error) bool {
	var e *expectedError
	return errors.As(err, &e)
}

// Syncer is a source a controller waits for before its first reconcile
// (a *Cache).
type Syncer interface {
	WaitForSync(ctx context.Context) error
}

// ControllerConfig configures a Controller.
type ControllerConfig struct {
	// Name names the controller in logs and workqueue metrics.
	Name       string
	Reconciler Reconciler
	// Workers is the number of concurrent reconciles; 0 means 1.
	Workers int
	// Owns reports whether this replica is responsible for a key; nil owns
	// every key. It is checked when a key is queued and again right before
	// each reconcile, so a key that moves to another replica is dropped
	// here. Scale-out partitioning plugs in here.
	Owns func(key string) bool
	// Guard, if set, is called right before each reconcile instead of
	// Owns: ok false skips the key (as Owns false does); otherwise done is
	// called when the reconcile returns. A partitioner uses it to release a
	// partition only once no reconcile of its keys is running.
	Guard func(key string) (done func(), ok bool)
	// WaitFor are the caches to sync before the first reconcile.
	WaitFor []Syncer
	// RateLimiter for retries; nil is the workqueue's default controller
	// rate limiter.
	RateLimiter workqueue.TypedRateLimiter[string]
	Log         *slog.Logger
}

// Controller runs a Reconciler over a Queue with N workers.
type Controller struct {
	cfg     ControllerConfig
	log     *slog.Logger
	queue   *Queue
	running atomic.Bool

	// resyncs queue every key of a source (For, ResyncFrom).
	resyncMu sync.Mutex
	resyncs  []func(cause *events.Event)
}

// NewController builds a controller. Keys can be queued (Enqueue) before
// Run; they are reconciled once Run starts.
func NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.Reconciler == nil || cfg.Name == "" {
		return nil, fmt.Errorf("consumer: new controller: Name and Reconciler are required: %w", ErrConfig)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Controller{
		cfg:   cfg,
		log:   cfg.Log.With("controller", cfg.Name),
		queue: NewQueue(cfg.Name, cfg.RateLimiter),
	}, nil
}

// Queue is the controller's work queue.
func (c *Controller) Queue() *Queue { return c.queue }

// Enqueue queues key with the event that caused it (nil: no event), unless
// the controller does not own the key.
func (c *Controller) Enqueue(key string, ev *events.Event) {
	if c.cfg.Owns != nil && !c.cfg.Owns(key) {
		return
	}
	c.queue.Add(key, CauseOf(ev))
}

// Run waits for the caches in WaitFor, then reconciles queued keys with
// Workers goroutines until ctx ends. It shuts the queue down, waits for
// every reconcile in flight to return, and returns nil; or the error of a
// cache that could not sync. A Controller runs once.
func (c *Controller) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return fmt.Errorf("consumer: controller %s: %w", c.cfg.Name, ErrRunning)
	}
	defer c.queue.ShutDown()
	for _, s := range c.cfg.WaitFor {
		if err := s.WaitForSync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("consumer: controller %s: %w", c.cfg.Name, err)
		}
	}
	c.log.Info("started", "workers", c.cfg.Workers)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.log.Info("stopped")
	return nil
}

// next processes one key; false when the queue is shut down.
func (c *Controller) next(ctx context.Context) bool {
	key, cause, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if c.cfg.Guard != nil {
		done, ok := c.cfg.Guard(key)
		if !ok {
			c.queue.Forget(key)
			return true
		}
		defer done()
	} else if c.cfg.Owns != nil && !c.cfg.Owns(key) {
		c.queue.Forget(key)
		return true
	}
	log := c.log.With("key", key)
	if !cause.IsZero() {
		log = log.With("event", cause.EventID, "revision", int64(cause.Revision))
	}
	res, err := c.reconcile(WithCause(ctx, cause), Request{Key: key, Cause: cause})
	switch {
	case err == nil:
		c.queue.Forget(key)
		if res.RequeueAfter > 0 {
			c.queue.AddAfter(key, Cause{}, res.RequeueAfter)
		}
	case ctx.Err() != nil:
		// Shutting down: the key is reconciled again after the restart.
	case IsTerminal(err):
		c.queue.Forget(key)
		log.Error("reconcile failed, not retrying", "err", err)
	default:
		// A conflict is optimistic concurrency doing its job: the key is
		// reconciled again on the newer object (kube's controllers log it
		// at V(2), not as a warning).
		level := slog.LevelWarn
		if IsExpected(err) || apierrors.IsConflict(err) {
			level = slog.LevelInfo
		}
		log.Log(ctx, level, "reconcile failed, retrying", "err", err, "requeues", c.queue.NumRequeues(key))
		c.queue.AddRateLimited(key)
	}
	return true
}

// reconcile calls the reconciler, turning a panic into an error.
func (c *Controller) reconcile(ctx context.Context, req Request) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("consumer: reconcile %s panicked: %v\n%s", req.Key, r, debug.Stack())
		}
	}()
	return c.cfg.Reconciler.Reconcile(ctx, req)
}

// Watch makes changes in cache queue keys of ctrl: for every added,
// updated or deleted object, keys(obj) are queued with the event that
// caused the change. keys nil queues the object's own key; OwnerKeys queues
// its controller's key.
func Watch[T Object](cache *Cache[T], ctrl *Controller, keys func(obj T) []string) {
	if keys == nil {
		keys = func(obj T) []string { return []string{KeyOf(obj)} }
	}
	enqueue := func(obj T, ev *events.Event) {
		for _, k := range keys(obj) {
			ctrl.Enqueue(k, ev)
		}
	}
	cache.AddHandler(Handler[T]{
		OnAdd:    enqueue,
		OnUpdate: func(_, obj T, ev *events.Event) { enqueue(obj, ev) },
		OnDelete: enqueue,
	})
}

// For is Watch, and makes cache a resync source of ctrl: Resync (a
// sharded replica's takeover) queues keys(obj) of every object in cache.
// A controller is For the resource whose objects it reconciles.
func For[T Object](cache *Cache[T], ctrl *Controller, keys func(obj T) []string) {
	Watch(cache, ctrl, keys)
	ResyncFrom(cache, ctrl, keys)
}

// ResyncFrom makes cache a resync source of ctrl (see For) without
// watching it: for a controller with handlers of its own.
func ResyncFrom[T Object](cache *Cache[T], ctrl *Controller, keys func(obj T) []string) {
	if keys == nil {
		keys = func(obj T) []string { return []string{KeyOf(obj)} }
	}
	ctrl.OnResync(func(cause *events.Event) {
		for _, obj := range cache.List(nil) {
			for _, k := range keys(obj) {
				ctrl.Enqueue(k, cause)
			}
		}
	})
}

// OnResync adds f to what Resync does: f queues, with cause, the keys it
// must (ResyncFrom is OnResync for a cache).
func (c *Controller) OnResync(f func(cause *events.Event)) {
	c.resyncMu.Lock()
	defer c.resyncMu.Unlock()
	c.resyncs = append(c.resyncs, f)
}

// Resync queues, with cause, the keys of every object of the controller's
// resync sources (For, ResyncFrom); Owns drops those of other replicas.
func (c *Controller) Resync(cause *events.Event) {
	c.resyncMu.Lock()
	rs := append([]func(*events.Event){}, c.resyncs...)
	c.resyncMu.Unlock()
	for _, r := range rs {
		r(cause)
	}
}

// OwnerKeys maps an object to the key of its controller (the ownerReference
// with controller: true) if that controller is of the given kind: the pods
// of a ReplicaSet queue the ReplicaSet with OwnerKeys[*corev1.Pod]("ReplicaSet").
func OwnerKeys[T Object](kind string) func(obj T) []string {
	return func(obj T) []string {
		for _, ref := range obj.GetOwnerReferences() {
			if ref.Controller != nil && *ref.Controller && ref.Kind == kind {
				return []string{Key(obj.GetNamespace(), ref.Name)}
			}
		}
		return nil
	}
}

// Runner is a long-running part: a *Cache, a *Controller, a *Manager
// (supervisor.Runner: Run blocks until ctx is done and returns after every
// goroutine it started).
type Runner = supervisor.Runner

// RunnerFunc adapts a function to Runner.
type RunnerFunc = supervisor.RunnerFunc

// RunAll runs every runner until ctx ends or one of them fails; then it
// cancels the others, waits for all of them, and returns the first error
// (supervisor.RunAll).
func RunAll(ctx context.Context, runners ...Runner) error { return supervisor.RunAll(ctx, runners...) }
