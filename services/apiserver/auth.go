package apiserver

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strings"

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
// RBAC roles that its own components need, as rules (defaultPolicy):
//   - system:masters may do anything;
//   - the controller manager and the scheduler may do anything to API
//     objects;
//   - nodes (group system:nodes) may read everything, write Nodes, Events,
//     Leases and pods' status, and create and delete pods;
//   - everyone authenticated may read discovery, OpenAPI, health, version
//     and metrics, and ask who they are and what they may do (the self
//     reviews);
//   - anyone may read health and version.
type DefaultAuthorizer struct{}

var (
	_ Authorizer = DefaultAuthorizer{}
	_ RuleLister = DefaultAuthorizer{}
)

// PolicyRule grants verbs on API resources, or on non-resource URLs, as an
// RBAC PolicyRule does; "*" matches anything.
type PolicyRule struct {
	Verbs     []string
	APIGroups []string
	// Resources are "pods", "pods/status", "pods/*" (every subresource of
	// pods) or "*" (every resource and subresource).
	Resources []string
	// NonResourceURLs are paths; a trailing "*" matches a prefix.
	NonResourceURLs []string
}

// grant gives rules to users and to the members of groups.
type grant struct {
	Users, Groups []string
	Rules         []PolicyRule
}

// RuleLister is an Authorizer that can list what a user may do; it
// answers SelfSubjectRulesReview (kubectl auth can-i --list).
type RuleLister interface {
	RulesFor(u User) []PolicyRule
}

// GroupUnauthenticated is the group of requests without credentials.
const GroupUnauthenticated = "system:unauthenticated"

var (
	anything    = []string{"*"}
	publicPaths = []string{"/healthz", "/livez", "/readyz", "/version", "/version/"}
)

// defaultPolicy is DefaultAuthorizer's policy.
var defaultPolicy = []grant{
	{Groups: []string{GroupMasters}, Rules: []PolicyRule{
		{Verbs: anything, APIGroups: anything, Resources: anything},
		{Verbs: anything, NonResourceURLs: anything},
	}},
	{Users: []string{UserControllers, UserScheduler}, Rules: []PolicyRule{
		{Verbs: anything, APIGroups: anything, Resources: anything},
	}},
	{Groups: []string{GroupNodes}, Rules: []PolicyRule{
		{Verbs: []string{"get", "list", "watch"}, APIGroups: anything, Resources: anything},
		{Verbs: anything, APIGroups: anything, Resources: []string{"nodes", "nodes/*", "events", "events/*", "leases", "leases/*", "pods/status"}},
		{Verbs: []string{"create", "delete"}, APIGroups: anything, Resources: []string{"pods", "pods/*"}},
	}},
	{Groups: []string{GroupAuthenticated}, Rules: []PolicyRule{
		{Verbs: anything, NonResourceURLs: anything},
		{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
		{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}},
	}},
	{Groups: []string{GroupUnauthenticated, GroupAuthenticated}, Rules: []PolicyRule{
		{Verbs: anything, NonResourceURLs: publicPaths},
	}},
}

// Authorize implements Authorizer.
func (DefaultAuthorizer) Authorize(_ context.Context, a Attributes) (bool, string) {
	for _, g := range defaultPolicy {
		if g.covers(a.User) && slices.ContainsFunc(g.Rules, func(r PolicyRule) bool { return r.allows(a) }) {
			return true, ""
		}
	}
	return false, ""
}

// RulesFor implements RuleLister: the rules of every grant u falls under.
func (DefaultAuthorizer) RulesFor(u User) []PolicyRule {
	var out []PolicyRule
	for _, g := range defaultPolicy {
		if g.covers(u) {
			out = append(out, g.Rules...)
		}
	}
	return out
}

func (g grant) covers(u User) bool {
	return slices.Contains(g.Users, u.User) || slices.ContainsFunc(g.Groups, func(grp string) bool { return slices.Contains(u.Groups, grp) })
}

func (r PolicyRule) allows(a Attributes) bool {
	if !matchesAny(r.Verbs, a.Verb) {
		return false
	}
	if a.Resource == "" {
		return slices.ContainsFunc(r.NonResourceURLs, func(u string) bool {
			if p, ok := strings.CutSuffix(u, "*"); ok {
				return strings.HasPrefix(a.Path, p)
			}
			return u == a.Path
		})
	}
	if !matchesAny(r.APIGroups, a.APIGroup) {
		return false
	}
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	return slices.ContainsFunc(r.Resources, func(rr string) bool {
		return rr == "*" || rr == res || a.Subresource != "" && rr == a.Resource+"/*"
	})
}

func matchesAny(rule []string, v string) bool {
	return slices.Contains(rule, "*") || slices.Contains(rule, v)
}

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
