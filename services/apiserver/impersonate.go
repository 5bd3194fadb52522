package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The impersonation headers, as kube-apiserver reads them (kubectl --as,
// --as-group, --as-uid).
const (
	ImpersonateUserHeader        = "Impersonate-User"
	ImpersonateGroupHeader       = "Impersonate-Group"
	ImpersonateUIDHeader         = "Impersonate-Uid"
	ImpersonateExtraHeaderPrefix = "Impersonate-Extra-"
)

const serviceAccountPrefix = "system:serviceaccount:"

// impersonate is kube's WithImpersonation filter: if r asks to act as
// someone else, every part of the new identity (the user or service
// account, each group, the uid, each extra value) must be allowed to
// requester by the `impersonate` verb on users, serviceaccounts, groups,
// uids or userextras/<key>. It returns the identity the request then
// runs as (requester when r impersonates nobody), or the error to answer:
// 400 for groups, uid or extras without a user, 403 for a refused part.
// The headers are removed from r.
func (s *Server) impersonate(ctx context.Context, r *http.Request, requester User) (User, error) {
	name := r.Header.Get(ImpersonateUserHeader)
	groups := r.Header.Values(ImpersonateGroupHeader)
	uid := r.Header.Get(ImpersonateUIDHeader)
	extras := map[string][]string{}
	for h, vs := range r.Header {
		if key, ok := strings.CutPrefix(h, ImpersonateExtraHeaderPrefix); ok {
			k, err := url.PathUnescape(strings.ToLower(key))
			if err != nil {
				k = strings.ToLower(key)
			}
			extras[k] = vs
		}
	}
	if name == "" && len(groups) == 0 && uid == "" && len(extras) == 0 {
		return requester, nil
	}
	defer func() {
		for h := range r.Header {
			if strings.HasPrefix(h, "Impersonate-") {
				r.Header.Del(h)
			}
		}
	}()
	if name == "" {
		return User{}, apierrors.NewBadRequest("requested impersonation of groups, uid or extras without impersonating a user")
	}
	checks := []Attributes{}
	if rest, ok := strings.CutPrefix(name, serviceAccountPrefix); ok && strings.Count(rest, ":") == 1 {
		ns, sa, _ := strings.Cut(rest, ":")
		checks = append(checks, Attributes{Resource: "serviceaccounts", Namespace: ns, Name: sa})
		if len(groups) == 0 {
			// A service account's groups are a fixed mapping.
			groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
		}
	} else {
		checks = append(checks, Attributes{Resource: "users", Name: name})
	}
	for _, g := range r.Header.Values(ImpersonateGroupHeader) {
		checks = append(checks, Attributes{Resource: "groups", Name: g})
	}
	if uid != "" {
		checks = append(checks, Attributes{APIGroup: "authentication.k8s.io", Resource: "uids", Name: uid})
	}
	for _, k := range sortedKeys(extras) {
		for _, v := range extras[k] {
			checks = append(checks, Attributes{APIGroup: "authentication.k8s.io", Resource: "userextras", Subresource: k, Name: v})
		}
	}
	for _, a := range checks {
		a.User, a.Verb = requester, "impersonate"
		if allowed, reason := s.cfg.Authorizer.Authorize(ctx, a); !allowed {
			return User{}, forbiddenAttrs(a, reason)
		}
	}
	if name == UserAnonymous {
		if !slices.Contains(groups, GroupUnauthenticated) {
			groups = append(groups, GroupUnauthenticated)
		}
	} else if !slices.Contains(groups, GroupAuthenticated) && !slices.Contains(groups, GroupUnauthenticated) {
		groups = append(groups, GroupAuthenticated)
	}
	u := User{User: name, UID: uid, Groups: groups}
	if len(extras) > 0 {
		u.Extra = extras
	}
	return u, nil
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// forbiddenAttrs is kube's responsewriters.Forbidden message for a
// refused resource decision.
func forbiddenAttrs(a Attributes, reason string) error {
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q", a.User.User, a.Verb, res, a.APIGroup)
	if a.Namespace != "" {
		msg += fmt.Sprintf(" in the namespace %q", a.Namespace)
	} else {
		msg += " at the cluster scope"
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}, a.Name, errors.New(msg))
}
