package apiserver

import (
	"context"
	"testing"
)

func TestDefaultAuthorizer(t *testing.T) {
	var (
		admin      = User{User: "admin", Groups: []string{GroupMasters, GroupAuthenticated}}
		controller = User{User: UserControllers, Groups: []string{GroupAuthenticated}}
		scheduler  = User{User: UserScheduler, Groups: []string{GroupAuthenticated}}
		node       = User{User: "system:node:n1", Groups: []string{GroupNodes, GroupAuthenticated}}
		alice      = User{User: "alice", Groups: []string{GroupAuthenticated}}
		anonymous  = User{User: UserAnonymous, Groups: []string{"system:unauthenticated"}}
	)
	res := func(u User, verb, group, resource, sub string) Attributes {
		return Attributes{User: u, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: "default"}
	}
	path := func(u User, verb, p string) Attributes { return Attributes{User: u, Verb: verb, Path: p} }
	cases := []struct {
		name string
		a    Attributes
		want bool
	}{
		{"masters delete anything", res(admin, "delete", "apps", "deployments", ""), true},
		{"anonymous metrics", path(anonymous, "get", "/metrics"), false},
		{"controller manager writes workloads", res(controller, "create", "", "pods", ""), true},
		{"scheduler binds", res(scheduler, "create", "", "pods", "binding"), true},
		{"node reads anything", res(node, "list", "", "secrets", ""), true},
		{"node writes its node", res(node, "update", "", "nodes", "status"), true},
		{"node renews leases", res(node, "update", "coordination.k8s.io", "leases", ""), true},
		{"node writes events", res(node, "create", "", "events", ""), true},
		{"node writes pod status", res(node, "patch", "", "pods", "status"), true},
		{"node deletes pods", res(node, "delete", "", "pods", ""), true},
		{"node creates mirror pods", res(node, "create", "", "pods", ""), true},
		{"node may not update pod specs", res(node, "update", "", "pods", ""), false},
		{"node may not write deployments", res(node, "create", "apps", "deployments", ""), false},
		{"user may not read pods", res(alice, "get", "", "pods", ""), false},
		{"user reads discovery", path(alice, "get", "/apis"), true},
		{"user asks what it may do", res(alice, "create", "authorization.k8s.io", "selfsubjectaccessreviews", ""), true},
		{"user asks who it is", res(alice, "create", "authentication.k8s.io", "selfsubjectreviews", ""), true},
		{"user may not read reviews", res(alice, "list", "authorization.k8s.io", "selfsubjectaccessreviews", ""), false},
		{"review in another group is a resource like any", res(alice, "create", "example.com", "selfsubjectreviews", ""), false},
		{"anonymous health", path(anonymous, "get", "/healthz"), true},
		{"anonymous version", path(anonymous, "get", "/version"), true},
		{"anonymous head", path(anonymous, "head", "/readyz"), true},
		{"user reads metrics", path(alice, "get", "/metrics"), true},
		{"controller manager reads metrics", path(controller, "get", "/metrics"), true},
		{"user asks what rules it has", res(alice, "create", "authorization.k8s.io", "selfsubjectrulesreviews", ""), true},
		{"node binds", res(node, "create", "", "pods", "binding"), true},
		{"node reads logs", res(node, "get", "", "pods", "log"), true},
		{"node creates any pod subresource", res(node, "create", "", "pods", "exec"), true},
		{"anonymous discovery", path(anonymous, "get", "/api"), false},
		{"anonymous review", res(anonymous, "create", "authentication.k8s.io", "selfsubjectreviews", ""), false},
	}
	for _, c := range cases {
		if got, _ := (DefaultAuthorizer{}).Authorize(context.Background(), c.a); got != c.want {
			t.Errorf("%s: %+v allowed = %v, want %v", c.name, c.a, got, c.want)
		}
	}
}

// BenchmarkDefaultAuthorizer is the policy's cost per request, for the
// last grant to match (a node writing pod status).
func BenchmarkDefaultAuthorizer(b *testing.B) {
	a := Attributes{User: User{User: "system:node:n1", Groups: []string{GroupNodes, GroupAuthenticated}},
		Verb: "patch", Resource: "pods", Subresource: "status", Namespace: "default", Name: "p"}
	for b.Loop() {
		if ok, _ := (DefaultAuthorizer{}).Authorize(context.Background(), a); !ok {
			b.Fatal("denied")
		}
	}
}
