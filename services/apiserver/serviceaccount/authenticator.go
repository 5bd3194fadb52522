package serviceaccount

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	saauth "k8s.io/apiserver/pkg/authentication/serviceaccount"
	jwtauth "k8s.io/apiserver/pkg/authentication/token/jwt"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/pki/satoken"
)

// Authenticator is kube's service-account token authenticator
// (pkg/serviceaccount/jwt.go with the bound and legacy validators): a
// bearer JWT of Tokens' issuer or the legacy issuer, signed by one of the
// verifying keys, for one of the apiserver's audiences, not expired, whose
// ServiceAccount (and bound Pod or Secret, or legacy Secret holding this
// very token) still exists with the UID in the token. The user is
// system:serviceaccount:NS:NAME in system:serviceaccounts and
// system:serviceaccounts:NS.
//
// A bearer token that is not such a JWT is left to the next authenticator
// (ok false, no error); one that is but fails a check is ErrUnauthorized
// (401 "Unauthorized", as kube-apiserver answers: the reason, which may
// tell whether an object exists, goes to the log only).
// The lookups are Caches': no etcd read unless an object is missing from
// them.
type Authenticator struct {
	Tokens *satoken.Tokens
	Caches *Caches
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log gets the reasons of refusals (debug); nil discards them.
	Log *slog.Logger
}

// ErrUnauthorized is what Authenticate returns for a service-account
// token that fails a check.
var ErrUnauthorized = errors.New("Unauthorized")

var _ apiserver.Authenticator = (*Authenticator)(nil)

// Authenticate implements apiserver.Authenticator.
func (a *Authenticator) Authenticate(r *http.Request) (apiserver.User, bool, error) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return apiserver.User{}, false, nil
	}
	u, err := a.AuthenticateToken(r.Context(), strings.TrimSpace(raw))
	if errors.Is(err, satoken.ErrNotServiceAccountToken) {
		return apiserver.User{}, false, nil
	}
	if err != nil {
		if a.Log != nil {
			a.Log.Debug("service-account token refused", "err", err)
		}
		return apiserver.User{}, false, ErrUnauthorized
	}
	return u, true, nil
}

// AuthenticateToken verifies one token for the apiserver's audiences (see
// Authenticator); a token that is not one of ours is
// satoken.ErrNotServiceAccountToken.
func (a *Authenticator) AuthenticateToken(ctx context.Context, raw string) (apiserver.User, error) {
	u, _, err := a.authenticate(ctx, raw, a.Tokens.Audiences())
	return u, err
}

var _ apiserver.AudienceAuthenticator = (*Authenticator)(nil)

// AuthenticateAudiences implements apiserver.AudienceAuthenticator: the
// token must be for one of targets (a TokenReview's audiences); matched
// are those it is for. The user is kube's ServiceAccountInfo.UserInfo: the
// ServiceAccount's UID, and in extra the bound pod's name and UID, the
// node's name and UID and the credential id (JTI=<jti>).
func (a *Authenticator) AuthenticateAudiences(ctx context.Context, raw string, targets []string) (apiserver.User, []string, error) {
	u, matched, err := a.authenticate(ctx, raw, targets)
	if errors.Is(err, satoken.ErrNotServiceAccountToken) {
		return apiserver.User{}, nil, fmt.Errorf("%w: %w", apiserver.ErrTokenNotRecognized, err)
	}
	return u, matched, err
}

func (a *Authenticator) authenticate(ctx context.Context, raw string, targets []string) (apiserver.User, []string, error) {
	var public jwt.Claims
	var bound satoken.PrivateClaims
	var legacy satoken.LegacyClaims
	if err := a.Tokens.Verify(raw, &public, &bound, &legacy); err != nil {
		return apiserver.User{}, nil, err
	}
	auds := []string(public.Audience)
	if len(auds) == 0 {
		// Only the apiserver's audiences are allowed for legacy tokens.
		auds = a.Tokens.Audiences()
	}
	var matched []string
	for _, t := range targets {
		if slices.Contains(auds, t) {
			matched = append(matched, t)
		}
	}
	if len(matched) == 0 {
		return apiserver.User{}, nil, fmt.Errorf("token audiences %q is invalid for the target audiences %q", auds, targets)
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	var info *saauth.ServiceAccountInfo
	var err error
	if public.Issuer == satoken.LegacyIssuer {
		info, err = a.validateLegacy(ctx, raw, &public, &legacy)
	} else {
		info, err = a.validateBound(ctx, now(), &public, &bound)
	}
	if err != nil {
		return apiserver.User{}, nil, err
	}
	ui := info.UserInfo()
	return apiserver.User{User: ui.GetName(), UID: ui.GetUID(), Groups: ui.GetGroups(), Extra: ui.GetExtra()}, matched, nil
}

// deletedBefore reports whether an object was marked deleted before the
// leeway (kube treats an object being deleted for less than a minute as
// still there).
func deletedBefore(ts *metav1.Time, now time.Time) bool {
	return ts != nil && ts.Time.Before(now.Add(-jwt.DefaultLeeway))
}

// validateBound is kube's validator.Validate of bound tokens.
func (a *Authenticator) validateBound(ctx context.Context, now time.Time, public *jwt.Claims, private *satoken.PrivateClaims) (*saauth.ServiceAccountInfo, error) {
	switch err := public.Validate(jwt.Expected{Time: now}); {
	case err == nil:
	case errors.Is(err, jwt.ErrExpired):
		return nil, errors.New("service account token has expired")
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, errors.New("service account token is not valid yet")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, errors.New("service account token is issued in the future")
	default:
		return nil, err
	}
	k := private.Kubernetes
	if k.Namespace == "" || k.Svcacct.Name == "" {
		return nil, errors.New("service account token claims are missing")
	}
	sa, err := a.Caches.ServiceAccount(ctx, k.Namespace, k.Svcacct.Name)
	if err != nil {
		return nil, err
	}
	if deletedBefore(sa.DeletionTimestamp, now) {
		return nil, fmt.Errorf("service account %s/%s has been deleted", k.Namespace, k.Svcacct.Name)
	}
	if string(sa.UID) != k.Svcacct.UID {
		return nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.UID, k.Svcacct.UID)
	}
	if s := k.Secret; s != nil {
		secret, err := a.Caches.Secret(ctx, k.Namespace, s.Name)
		if err != nil {
			return nil, err
		}
		if deletedBefore(secret.DeletionTimestamp, now) {
			return nil, fmt.Errorf("secret %s/%s has been deleted", k.Namespace, s.Name)
		}
		if string(secret.UID) != s.UID {
			return nil, fmt.Errorf("secret UID (%s) does not match service account secret ref claim (%s)", secret.UID, s.UID)
		}
	}
	info := &saauth.ServiceAccountInfo{Namespace: k.Namespace, Name: k.Svcacct.Name, UID: string(sa.UID)}
	if p := k.Pod; p != nil {
		pod, err := a.Caches.Pod(ctx, k.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		if deletedBefore(pod.DeletionTimestamp, now) {
			return nil, fmt.Errorf("pod %s/%s has been deleted", k.Namespace, p.Name)
		}
		if string(pod.UID) != p.UID {
			return nil, fmt.Errorf("pod UID (%s) does not match service account pod ref claim (%s)", pod.UID, p.UID)
		}
		info.PodName, info.PodUID = p.Name, string(pod.UID)
	}
	// The node of a pod-bound token is informational, as in kube: not
	// looked up.
	if n := k.Node; n != nil {
		info.NodeName, info.NodeUID = n.Name, n.UID
	}
	if public.ID != "" {
		info.CredentialID = jwtauth.CredentialIDForJTI(public.ID)
	}
	return info, nil
}

// validateLegacy is kube's legacyValidator.Validate (with lookup on).
func (a *Authenticator) validateLegacy(ctx context.Context, raw string, public *jwt.Claims, private *satoken.LegacyClaims) (*saauth.ServiceAccountInfo, error) {
	switch {
	case public.Subject == "":
		return nil, errors.New("sub claim is missing")
	case private.Namespace == "":
		return nil, errors.New("namespace claim is missing")
	case private.SecretName == "":
		return nil, errors.New("secretName claim is missing")
	case private.ServiceAccountName == "":
		return nil, errors.New("serviceAccountName claim is missing")
	case private.ServiceAccountUID == "":
		return nil, errors.New("serviceAccountUID claim is missing")
	}
	ns, name, err := satoken.SplitUserName(public.Subject)
	if err != nil || ns != private.Namespace || name != private.ServiceAccountName {
		return nil, errors.New("sub claim is invalid")
	}
	now := time.Now()
	secret, err := a.Caches.Secret(ctx, ns, private.SecretName)
	if err != nil || deletedBefore(secret.DeletionTimestamp, now) {
		return nil, errors.New("Token has been invalidated")
	}
	if subtle.ConstantTimeCompare(secret.Token, []byte(raw)) == 0 {
		return nil, errors.New("Token does not match server's copy")
	}
	sa, err := a.Caches.ServiceAccount(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if deletedBefore(sa.DeletionTimestamp, now) {
		return nil, fmt.Errorf("ServiceAccount (%s/%s) deleted", ns, name)
	}
	if string(sa.UID) != private.ServiceAccountUID {
		return nil, fmt.Errorf("ServiceAccount UID (%s) does not match claim (%s)", sa.UID, private.ServiceAccountUID)
	}
	return &saauth.ServiceAccountInfo{Namespace: ns, Name: name, UID: string(sa.UID)}, nil
}
