package apiserver

import (
	"context"
	"errors"
	"net/http"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// errInvalidToken is kube's bearer-token authenticator's answer for a
// token that no authenticator knows.
var errInvalidToken = errors.New("invalid bearer token")

// reviewToken answers a TokenReview as kube's tokenreview REST does: the
// token goes through the apiserver's authenticators as the only credential
// of a request, for the review's audiences (the apiserver's when it names
// none). Audience-aware authenticators (service-account tokens) check the
// token's own audiences; the others stand for the apiserver's audiences
// only, as kube's WrapAudienceAgnosticToken, so they answer only when the
// review asks for one of them. A token that fails has authenticated false
// and the reason in status.error; the status names the user (with uid and
// extra) and the audiences the token is for.
func (s *Server) reviewToken(ctx context.Context, spec authenticationv1.TokenReviewSpec) (authenticationv1.TokenReviewStatus, error) {
	auds := spec.Audiences
	if len(auds) == 0 {
		auds = s.cfg.APIAudiences
	}
	var apiAuds []string
	for _, a := range auds {
		if slices.Contains(s.cfg.APIAudiences, a) {
			apiAuds = append(apiAuds, a)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
	if err != nil {
		return authenticationv1.TokenReviewStatus{}, apierrors.NewInternalError(err)
	}
	req.Header.Set("Authorization", "Bearer "+spec.Token)
	chain, ok := s.cfg.Authenticator.(Authenticators)
	if !ok {
		chain = Authenticators{s.cfg.Authenticator}
	}
	var st authenticationv1.TokenReviewStatus
	for _, a := range chain {
		var u User
		var matched []string
		var err error
		if aa, ok := a.(AudienceAuthenticator); ok {
			u, matched, err = aa.AuthenticateAudiences(ctx, spec.Token, auds)
			if errors.Is(err, ErrTokenNotRecognized) {
				continue
			}
		} else {
			if len(apiAuds) == 0 {
				continue
			}
			var found bool
			if u, found, err = a.Authenticate(req); err == nil && !found {
				continue
			}
			matched = apiAuds
		}
		if err != nil {
			st.Error = err.Error()
			return st, nil
		}
		if len(auds) > 0 && len(matched) == 0 {
			return st, apierrors.NewInternalError(errors.New("error validating audiences"))
		}
		u.Groups = appendIfMissing(u.Groups, GroupAuthenticated)
		st.Authenticated, st.User, st.Audiences = true, authUserInfo(u), matched
		return st, nil
	}
	st.Error = errInvalidToken.Error()
	return st, nil
}
