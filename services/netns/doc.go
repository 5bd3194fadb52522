// Package netns makes sockets inside a Linux network namespace from a
// process that lives in another one.
//
// A network namespace belongs to a thread, not to a process, and a socket
// belongs for its whole life to the namespace of the thread that created
// it. Do therefore runs a function on an OS thread locked to its goroutine
// (runtime.LockOSThread) and switched into the namespace with setns(2);
// Listen and DialContext create their socket there. Afterwards the thread
// is switched back and unlocked. When it cannot be switched back it is left
// locked, and the Go runtime discards a thread whose goroutine exits while
// locked, so no other goroutine ever runs in the wrong namespace.
//
// The sockets returned are ordinary net.Listener and net.Conn values: any
// goroutine may use them afterwards, on any thread; they stay in the
// namespace they were made in.
//
// A namespace is named by a path: a bind mount such as /run/netns/NAME
// (ip netns add) or /proc/PID/ns/net.
//
// Example:
//
//	ln, err := netns.Listen("/run/netns/cairn-node", "tcp", "10.88.0.1:6443")
//	if err != nil { ... }
//	go srv.Serve(ln) // serves inside the node's namespace
package netns
