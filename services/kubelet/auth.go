package kubelet

import (
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/pki"
)

// groupMasters may use every endpoint of the kubelet's API (the
// apiserver's GroupMasters; the kubelet does not import the apiserver).
const groupMasters = "system:masters"

// requestAttributes is what the kubelet authorizes a request on, as
// Kubernetes' kubelet builds it (nodeAuthorizerAttributesGetter): the
// resource is the node itself, the subresource names the endpoint, the
// verb comes from the method.
type requestAttributes struct {
	User        events.Actor
	Verb        string
	Resource    string
	Subresource string
	Name        string
}

// attributesFor maps a request to its attributes. Logs, exec, attach and
// port forwarding, the endpoints cairn's kubelet serves, are nodes/proxy,
// as everything the kubelet has no narrower subresource for.
func attributesFor(u events.Actor, r *http.Request, node string) requestAttributes {
	verb := ""
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		verb = "get"
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	return requestAttributes{User: u, Verb: verb, Resource: "nodes", Subresource: "proxy", Name: node}
}

// authorize is the kubelet's policy, the part of Kubernetes' default RBAC
// that matters for its API: users in system:masters (the admin, and the
// apiserver's kubelet client kube-apiserver-kubelet-client) may do
// everything; everyone else, nodes included, is denied. The apiserver
// decides who may read pods/log and run pods/exec; the kubelet only needs
// to know the request comes from the apiserver (or an admin).
func authorize(a requestAttributes) bool {
	return slices.Contains(a.User.Groups, groupMasters)
}

// authenticate takes the user from a TLS client certificate the server
// verified against Config.ClientCAs: the common name is the user, the
// organizations are the groups. A request without one is not
// authenticated (the kubelet's --anonymous-auth=false).
func authenticate(r *http.Request) (events.Actor, bool) {
	user, groups, ok := pki.ClientIdentity(r.TLS)
	return events.Actor{User: user, Groups: groups}, ok
}

// withAuth authenticates and authorizes every request but /healthz before
// next serves it, answering as Kubernetes' kubelet does: 401
// "Unauthorized" without verified credentials, 403 "Forbidden (user=...,
// verb=..., resource=..., subresource=...)" when the policy denies.
func (k *Kubelet) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		u, ok := authenticate(r)
		if !ok {
			writeError(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		a := attributesFor(u, r, k.cfg.NodeName)
		if !authorize(a) {
			k.log.Debug("kubelet API: forbidden", "user", u.User, "groups", u.Groups, "path", r.URL.Path)
			writeError(w, http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource=%s)",
				u.User, a.Verb, a.Resource, a.Subresource))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writeError writes msg as the whole body, as the kubelet's
// WriteErrorString does (no trailing newline).
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	io.WriteString(w, msg)
}
