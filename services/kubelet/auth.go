package kubelet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/pki"
)

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
	Path        string
}

// subresourcePaths are the endpoints kube's kubelet authorizes with a
// subresource of their own (pkg/kubelet/server/auth.go); everything else
// (logs of containers, exec, attach, port forwarding) is nodes/proxy.
var subresourcePaths = []struct{ prefix, subresource string }{
	{"/stats", "stats"},
	{"/metrics", "metrics"},
	{"/logs", "log"},
	{"/spec", "spec"},
	{"/checkpoint", "checkpoint"},
}

// isSubpath is kube's: path is prefix or below it.
func isSubpath(path, prefix string) bool {
	prefix = strings.TrimRight(prefix, "/")
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// attributesFor maps a request to its attributes as kube's kubelet does.
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
	a := requestAttributes{User: u, Verb: verb, Resource: "nodes", Subresource: "proxy", Name: node, Path: r.URL.Path}
	for _, p := range subresourcePaths {
		if isSubpath(r.URL.Path, p.prefix) {
			a.Subresource = p.subresource
			break
		}
	}
	return a
}

// The kubelet's webhook authorizer caches answers as kube's does by
// default (--authorization-webhook-cache-authorized-ttl=5m,
// --authorization-webhook-cache-unauthorized-ttl=30s).
const (
	authorizedTTL   = 5 * time.Minute
	unauthorizedTTL = 30 * time.Second
	authzCacheSize  = 1024
)

// sarAuthorizer asks the apiserver, with a SubjectAccessReview, whether
// the user may do what the request does to the node (the kubelet's
// --authorization-mode=Webhook), caching the answers for a while.
type sarAuthorizer struct {
	reviews authorizationclient.SubjectAccessReviewInterface
	cache   *cache.LRUExpireCache
}

func newSARAuthorizer(reviews authorizationclient.SubjectAccessReviewInterface) *sarAuthorizer {
	return &sarAuthorizer{reviews: reviews, cache: cache.NewLRUExpireCache(authzCacheSize)}
}

// review is the SubjectAccessReview of a.
func (a requestAttributes) review() *authorizationv1.SubjectAccessReview {
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: a.User.User, Groups: a.User.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.Verb, Version: "v1", Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
		},
	}}
}

// cacheKey identifies the question (the user, the groups and the
// attributes; the path is not part of a resource request's answer).
func (a requestAttributes) cacheKey() string {
	return strings.Join([]string{a.User.User, strings.Join(a.User.Groups, ","), a.Verb, a.Resource, a.Subresource, a.Name}, "\x00")
}

// authorize answers whether a is allowed; an error (the apiserver could
// not be asked) denies and is not cached.
func (s *sarAuthorizer) authorize(ctx context.Context, a requestAttributes) (bool, error) {
	key := a.cacheKey()
	if v, ok := s.cache.Get(key); ok {
		return v.(bool), nil
	}
	res, err := s.reviews.Create(ctx, a.review(), metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	allowed := res.Status.Allowed && !res.Status.Denied
	ttl := unauthorizedTTL
	if allowed {
		ttl = authorizedTTL
	}
	s.cache.Add(key, allowed, ttl)
	return allowed, nil
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
// verb=..., resource=..., subresource=...)" when the apiserver denies, 500
// "Authorization error (user=..., ...)" when it cannot be asked.
func (k *Kubelet) withAuth(next http.Handler) http.Handler {
	az := newSARAuthorizer(k.client.AuthorizationV1().SubjectAccessReviews())
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
		desc := fmt.Sprintf("user=%s, verb=%s, resource=%s, subresource=%s", u.User, a.Verb, a.Resource, a.Subresource)
		allowed, err := az.authorize(r.Context(), a)
		switch {
		case err != nil:
			k.log.Warn("kubelet API: authorization error", "user", u.User, "path", r.URL.Path, "err", err)
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("Authorization error (%s)", desc))
		case !allowed:
			k.log.Debug("kubelet API: forbidden", "user", u.User, "groups", u.Groups, "path", r.URL.Path)
			writeError(w, http.StatusForbidden, fmt.Sprintf("Forbidden (%s)", desc))
		default:
			next.ServeHTTP(w, r)
		}
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
