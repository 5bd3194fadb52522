// Package apitest holds the apiserver's integration tests: a real control
// plane (embedded etcd and NATS, publisher, hub) driven through client-go,
// raw HTTP and the machine's kubectl.
package apitest
