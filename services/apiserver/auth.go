package apiserver

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/pki"
)

// User is an authenticated identity.
type User = events.Actor

// Well-known users and groups, spelled as Kubernetes spells them.
const (
	GroupMasters       = "system:masters"
	GroupAuthenticated = "system:authenticated"
	GroupNodes         = "system:nodes"
	UserAnonymous      = "system:anonymous"
	UserControllers    = "system:kube-controller-manager"
	UserScheduler      = "system:kube-scheduler"
	NodeUserPrefix     = "system:node:"
)

// Authenticator identifies the user of a request. ok is false when the
// request carries no credentials it understands; err is for credentials
// that are present but wrong.
type Authenticator interface {
	Authenticate(r *http.Request) (u User, ok bool, err error)
}

// X509Authenticator takes the user from a verified TLS client certificate:
// CN is the user name, O the groups (as kube-apiserver does).
type X509Authenticator struct{}

var _ Authenticator = X509Authenticator{}

// Authenticate implements Authenticator.
func (X509Authenticator) Authenticate(r *http.Request) (User, bool, error) {
	user, groups, ok := pki.ClientIdentity(r.TLS)
	return User{User: user, Groups: groups}, ok, nil
}

// TokenAuthenticator accepts static bearer tokens (kube's --token-auth-file).
type TokenAuthenticator map[string]User

var _ Authenticator = TokenAuthenticator(nil)

// Authenticate implements Authenticator.
func (t TokenAuthenticator) Authenticate(r *http.Request) (User, bool, error) {
	h := r.Header.Get("Authorization")
	tok, found := strings.CutPrefix(h, "Bearer ")
	if !found {
		return User{}, false, nil
	}
	for k, u := range t {
		if subtle.ConstantTimeCompare([]byte(k), []byte(tok)) == 1 {
			return u, true, nil
		}
	}
	return User{}, false, fmt.Errorf("invalid bearer token")
}

// Authenticators tries each in turn; the first that recognises credentials
// decides.
type Authenticators []Authenticator

// Authenticate implements Authenticator.
func (as Authenticators) Authenticate(r *http.Request) (User, bool, error) {
	for _, a := range as {
		u, ok, err := a.Authenticate(r)
		if err != nil || ok {
			return u, ok, err
		}
	}
	return User{}, false, nil
}

// Attributes is what an authorizer decides on.
type Attributes struct {
	User        User
	Verb        string
	APIGroup    string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	// Path is set for non-resource requests.
	Path string
}

// Authorizer decides whether a request is allowed. reason explains a denial.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string)
}

// DefaultAuthorizer is cairn's built-in policy, the subset of kube's default
// RBAC roles that its own components need:
//   - system:masters may do anything;
//   - the controller manager and the scheduler may read everything and write
//     workloads, pods, bindings, events and leases;
//   - nodes (group system:nodes) may read what their pods need, write their
//     Node, their pods' status, leases and events, and delete pods;
//   - everyone authenticated may read discovery, OpenAPI, health and version,
//     and ask who they are and what they may do (the self reviews).
type DefaultAuthorizer struct{}

var _ Authorizer = DefaultAuthorizer{}

var readVerbs = map[string]bool{"get": true, "list": true, "watch": true}

// Authorize implements Authorizer.
func (DefaultAuthorizer) Authorize(_ context.Context, a Attributes) (bool, string) {
	if slices.Contains(a.User.Groups, GroupMasters) {
		return true, ""
	}
	if a.Resource == "" {
		// Non-resource paths: discovery, openapi, health, version, metrics.
		return a.User.User != UserAnonymous || publicPath(a.Path), ""
	}
	if a.Verb == "create" && isSelfReview(a.APIGroup, a.Resource) {
		return a.User.User != UserAnonymous, ""
	}
	switch {
	case a.User.User == UserControllers, a.User.User == UserScheduler:
		return true, ""
	case slices.Contains(a.User.Groups, GroupNodes):
		if readVerbs[a.Verb] {
			return true, ""
		}
		switch a.Resource {
		case "nodes", "events", "leases":
			return true, ""
		case "pods":
			return a.Subresource == "status" || a.Verb == "delete" || a.Verb == "create", ""
		}
	}
	return false, ""
}

func publicPath(p string) bool {
	switch p {
	case "/healthz", "/livez", "/readyz", "/version", "/version/":
		return true
	}
	return false
}

type ctxKey int

const (
	userKey ctxKey = iota
	infoKey
	auditKey
)

func userFrom(ctx context.Context) User {
	u, _ := ctx.Value(userKey).(User)
	return u
}

func auditIDFrom(ctx context.Context) string {
	s, _ := ctx.Value(auditKey).(string)
	return s
}
