package apiserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/pki"
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
	UserKubeProxy      = "system:kube-proxy"
	NodeUserPrefix     = "system:node:"
	// HollowKubeletUserPrefix and GroupHollowNodes are the identity of a
	// hollow kubelet process (cairn kubelet --runtime hollow), which
	// registers many simulated nodes under one credential: it is no node
	// to the Node authorizer and NodeRestriction (those allow a node only
	// its own objects), and the bootstrap policy binds the group to the
	// ClusterRole system:node.
	HollowKubeletUserPrefix = "cairn:hollow-kubelet:"
	GroupHollowNodes        = "cairn:hollow-nodes"
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

// AudienceAuthenticator is an Authenticator of bearer tokens that have
// audiences (kube's audience-aware token authenticators: service-account
// tokens). Asked whether token is for one of targets, it answers its user
// and the targets it is for; a token that is not its kind is
// ErrTokenNotRecognized. TokenReview asks it with the review's audiences.
type AudienceAuthenticator interface {
	Authenticator
	AuthenticateAudiences(ctx context.Context, token string, targets []string) (u User, matched []string, err error)
}

// ErrTokenNotRecognized is an AudienceAuthenticator's answer for a token
// that is not its kind (the next authenticator may know it).
var ErrTokenNotRecognized = errors.New("apiserver: token not recognized")

// userInfo is u as k8s.io/apiserver's user.Info (webhooks, policies).
func userInfo(u User) user.Info {
	return &user.DefaultInfo{Name: u.User, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
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

// MastersAuthorizer allows members of system:masters everything and
// nobody else anything: kube's privileged-group authorizer on its own. It
// is the authorizer of a Server configured without one; the control plane
// gives its apiserver the RBAC authorizer (package rbac), which starts with
// the same rule.
type MastersAuthorizer struct{}

var _ Authorizer = MastersAuthorizer{}

// Authorize implements Authorizer.
func (MastersAuthorizer) Authorize(_ context.Context, a Attributes) (bool, string) {
	return slices.Contains(a.User.Groups, GroupMasters), ""
}

// AlwaysAllow allows every request (kube's --authorization-mode=AlwaysAllow),
// the baseline of the authorization benchmark.
type AlwaysAllow struct{}

var _ Authorizer = AlwaysAllow{}

// Authorize implements Authorizer.
func (AlwaysAllow) Authorize(context.Context, Attributes) (bool, string) { return true, "" }

// RuleLister is an Authorizer that can list what a user may do in a
// namespace; it answers SelfSubjectRulesReview (kubectl auth can-i --list).
type RuleLister interface {
	RulesFor(u User, namespace string) authorizationv1.SubjectRulesReviewStatus
}

// GroupUnauthenticated is the group of requests without credentials.
const GroupUnauthenticated = "system:unauthenticated"

// publicPaths are served to requests without credentials (as
// system:anonymous), for the authorizer to decide on.
var publicPaths = []string{"/healthz", "/livez", "/readyz", "/version", "/version/", "/cacerts"}

func publicPath(p string) bool { return slices.Contains(publicPaths, p) }

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
