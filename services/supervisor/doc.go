// Package supervisor runs the long-running parts of one cairn process and
// owns their goroutines.
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
package supervisor
