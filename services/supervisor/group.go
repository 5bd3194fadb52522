package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Runner is a long-running part: Run blocks until ctx is done (or it
// fails) and returns after every goroutine it started has returned.
type Runner interface {
	Run(ctx context.Context) error
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context) error

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context) error { return f(ctx) }

// Group runs runners side by side, all started at once and stopped
// together: when its context ends or one of them fails, the others are
// cancelled, and Wait returns once every one has returned, with the first
// error. Runners may be added while it runs (Go); once it stops, Go starts
// nothing. It is what Run is for services started in order, for parts
// that need no order (a consumer's caches and controllers, the control
// plane's publisher and hub). A Group is used once; its methods are safe
// for concurrent use.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	stopping bool
	first    error
	errc     chan error
}

// NewGroup returns a Group whose runners get a context derived from ctx.
func NewGroup(ctx context.Context) *Group {
	g := &Group{errc: make(chan error, 1)}
	g.ctx, g.cancel = context.WithCancel(ctx)
	return g
}

// Context is the context the group's runners get: it ends when the group
// stops. Work a runner depends on but that starts before it (a lease kept
// alive for the runner) can be tied to it.
func (g *Group) Context() context.Context { return g.ctx }

// Go starts r, unless the group is stopping. A runner's error (other than
// the context's own after a stop) stops the group; name prefixes it.
func (g *Group) Go(name string, r Runner) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopping {
		return
	}
	g.wg.Go(func() {
		err := r.Run(g.ctx)
		if err == nil || (g.ctx.Err() != nil && errors.Is(err, context.Canceled)) {
			return
		}
		if name != "" {
			err = fmt.Errorf("%s: %w", name, err)
		}
		g.mu.Lock()
		if g.first == nil {
			g.first = err
			g.errc <- err
		}
		g.mu.Unlock()
		g.cancel()
	})
}

// Err receives the first error of a runner (once).
func (g *Group) Err() <-chan error { return g.errc }

// Stop cancels every runner; Wait waits for them.
func (g *Group) Stop() { g.cancel() }

// Wait returns, once the group's context ended or a runner failed and
// every runner returned, the first error.
func (g *Group) Wait() error {
	<-g.ctx.Done()
	g.mu.Lock()
	g.stopping = true
	g.mu.Unlock()
	g.wg.Wait()
	return g.first
}

// RunAll runs runners in a Group until ctx ends or one of them fails, and
// returns the first error once all of them returned.
func RunAll(ctx context.Context, runners ...Runner) error {
	g := NewGroup(ctx)
	for _, r := range runners {
		g.Go("", r)
	}
	return g.Wait()
}
