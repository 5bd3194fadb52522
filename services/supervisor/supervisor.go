package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrExited means a service returned nil before it was told to stop.
var ErrExited = errors.New("supervisor: service exited")

// Service is one long-running part of the process.
type Service interface {
	// Name is a short name for log lines, e.g. "etcd".
	Name() string
	// Run serves until ctx is cancelled, then releases what it holds and
	// returns nil (or ctx's error). It calls ready once it serves.
	Run(ctx context.Context, ready func()) error
}

// Describer is implemented by services that add a detail to their ready
// line, e.g. "embedded, data dir .cairn/etcd". Describe is called after the
// service called ready.
type Describer interface {
	Describe() string
}

// Options configure Run. The zero value is valid.
type Options struct {
	// Log receives start, ready and stop records; nil discards them.
	Log *slog.Logger
	// OnReady is called, from Run's goroutine, once per service in start
	// order, after the service called ready. detail is the service's
	// Describe() or "".
	OnReady func(name, detail string)
	// OnAllReady is called, from Run's goroutine, once every service is
	// ready (at once when there are none).
	OnAllReady func()
	// SlowStop is how long Run waits for a stopping service before it logs
	// a warning that names it; it keeps waiting after that. 0 means 10s.
	SlowStop time.Duration
}

// Func adapts a function to a Service.
func Func(name string, run func(ctx context.Context, ready func()) error) Service {
	return funcService{name: name, run: run}
}

type funcService struct {
	name string
	run  func(ctx context.Context, ready func()) error
}

func (f funcService) Name() string                                { return f.name }
func (f funcService) Run(ctx context.Context, ready func()) error { return f.run(ctx, ready) }

// running is one started service.
type running struct {
	svc    Service
	cancel context.CancelFunc
	done   chan struct{} // closed when svc.Run returned
	err    error         // svc.Run's result; read only after done
}

// Run starts services in order, waits for ctx to be cancelled or a service
// to fail, then stops them in reverse order. See the package documentation
// for the contract.
func Run(ctx context.Context, opts Options, services ...Service) error {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	slow := opts.SlowStop
	if slow <= 0 {
		slow = 10 * time.Second
	}
	// exits carries the index of every service whose Run returned.
	exits := make(chan int, len(services))
	started := make([]*running, 0, len(services))
	cause := -1 // index of the service whose exit caused the stop

	for i, svc := range services {
		// Services' contexts do not derive their cancellation from ctx:
		// they are cancelled one by one, in reverse order.
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r := &running{svc: svc, cancel: cancel, done: make(chan struct{})}
		ready := make(chan struct{})
		var once sync.Once
		readyFn := func() { once.Do(func() { close(ready) }) }

		log.Info("starting", "service", svc.Name())
		start := time.Now()
		go func() {
			defer func() { exits <- i }()
			defer close(r.done)
			r.err = svc.Run(sctx, readyFn)
		}()
		started = append(started, r)

		select {
		case <-ready:
			detail := ""
			if d, ok := svc.(Describer); ok {
				detail = d.Describe()
			}
			log.Info("ready", "service", svc.Name(), "detail", detail, "took", time.Since(start))
			if opts.OnReady != nil {
				opts.OnReady(svc.Name(), detail)
			}
			continue
		case cause = <-exits:
		case <-ctx.Done():
		}
		break
	}

	if cause < 0 && len(started) == len(services) {
		log.Info("all services ready", "count", len(services))
		if opts.OnAllReady != nil {
			opts.OnAllReady()
		}
		select {
		case cause = <-exits:
		case <-ctx.Done():
		}
	}
	if cause >= 0 {
		// exits is sent to after done is closed, so err is safe to read.
		log.Warn("service stopped on its own, stopping all", "service", services[cause].Name(), "err", started[cause].err)
	} else {
		log.Info("stopping", "reason", context.Cause(ctx))
	}
	return stop(log, slow, started, cause)
}

// stop cancels the started services in reverse order, waiting for each, and
// returns the cause's error first, joined with the errors of the others.
func stop(log *slog.Logger, slow time.Duration, started []*running, cause int) error {
	var first error
	var rest []error
	for i := len(started) - 1; i >= 0; i-- {
		r := started[i]
		name := r.svc.Name()
		r.cancel()
		waitSlow(log, slow, name, r.done)
		switch {
		case i == cause && r.err == nil:
			first = fmt.Errorf("%s: %w", name, ErrExited)
		case i == cause:
			first = fmt.Errorf("%s: %w", name, r.err)
		case r.err != nil && !errors.Is(r.err, context.Canceled):
			rest = append(rest, fmt.Errorf("%s: stop: %w", name, r.err))
			log.Error("stopped with error", "service", name, "err", r.err)
		default:
			log.Info("stopped", "service", name)
		}
	}
	return errors.Join(append([]error{first}, rest...)...)
}

// waitSlow waits for done, logging a warning every slow while it waits.
func waitSlow(log *slog.Logger, slow time.Duration, name string, done <-chan struct{}) {
	t := time.NewTicker(slow)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			log.Warn("still waiting for service to stop", "service", name, "waited", time.Since(start).Round(time.Second))
		}
	}
}
