// Package supervisor runs the long-running parts of one cairn process and
// owns their goroutines. Every long-running part is a Runner: Run(ctx)
// blocks until ctx is done and returns after every goroutine it started;
// readiness is reported apart from Run. Two ways to run them:
//
//   - Run starts Services one after the other, each once the one before is
//     ready, and stops them in reverse order (the processes' top level:
//     `cairn up`'s control plane, controller manager, scheduler, node);
//   - a Group runs Runners side by side, started at once and stopped
//     together, more joining while it runs (a consumer.Manager's caches
//     and controllers, the control plane's publisher, hub and apiserver).
//     RunAll is a Group over a fixed list.
//
// # Start
//
// Run starts the services one at a time, in the order given. Service i+1 is
// started only after service i has called its ready function, so a later
// service may use what an earlier one serves (the apiserver starts after
// etcd is ready and may take its client then). Each service calls ready once
// it serves; calling it again does nothing.
//
// # Stop
//
// Everything stops when the context given to Run is cancelled, when a
// service returns an error, or when a service returns before it was told to
// stop (ErrExited). The services are then stopped in reverse start order:
// each one's context is cancelled and Run waits until its Run has returned
// before cancelling the one started before it. Run returns only when every
// service has returned; no goroutine outlives it.
//
// # Errors
//
// A service that returns nil or an error matching context.Canceled after its
// context was cancelled has stopped cleanly. Run returns nil when the parent
// context was cancelled and every service stopped cleanly; otherwise it
// returns the error that caused the stop first, joined with any error
// returned while stopping, each prefixed with the service's name.
//
// # Groups
//
// A Group stops when its context ends or when one of its runners returns an
// error (a context error after the stop is a clean exit): the others are
// cancelled, and Wait returns once every runner returned, with the first
// error, prefixed with the runner's name. Err delivers that error while the
// others stop.
package supervisor
