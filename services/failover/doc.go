// Package failover lets a client of the apiservers fail over between them
// by itself, as k3s agents do (k3s runs a load balancer on loopback; cairn
// puts the same list into the client's transport instead): Endpoints holds
// every apiserver's address, Wrap makes a rest.Config send each request to
// the current one, and a request whose connection fails moves the current
// address to the next. A request that could not be sent at all (the dial
// failed) is re-sent at once to the next address; one that failed after
// it was sent is returned to its caller, as a broken connection is to any
// client-go caller (the kubelet's status and lease loops, watches and
// informers retry), and the caller's next request goes to the next
// address.
//
// The list is refreshed from the cluster itself: every apiserver is an
// endpoint of the default/kubernetes Service, kept by its lease
// reconciler, so Run reads its EndpointSlices periodically and
// replaces the list (never with an empty one). Servers are verified by
// TLS as before: each server's certificate must cover its own address.
package failover
