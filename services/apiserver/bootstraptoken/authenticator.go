package bootstraptoken

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/schemas/codec"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/pki/jointoken"
)

// ErrInvalid is the error of a request whose bootstrap token does not
// authenticate; its message is all the client learns (as kube, it does not
// say whether the id or the secret was wrong).
var ErrInvalid = errors.New("bootstraptoken: invalid bootstrap token")

// Getter reads a Secret; a missing one is storage.ErrNotFound.
type Getter interface {
	Get(ctx context.Context, key string) (storage.KV, error)
}

var _ Getter = (*storage.Store)(nil)

// Authenticator authenticates bootstrap tokens against their Secrets.
type Authenticator struct {
	Store Getter
	// Now is the clock of expiry checks; nil is time.Now.
	Now func() time.Time
	Log *slog.Logger
}

var _ apiserver.Authenticator = (*Authenticator)(nil)

// Authenticate implements apiserver.Authenticator: a bearer token that is
// not of the bootstrap form is left to the next authenticator (ok false,
// no error); one of the form that does not check is ErrInvalid.
func (a *Authenticator) Authenticate(r *http.Request) (apiserver.User, bool, error) {
	tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found {
		return apiserver.User{}, false, nil
	}
	id, secret, ok := jointoken.ParseBootstrap(strings.TrimSpace(tok))
	if !ok {
		return apiserver.User{}, false, nil
	}
	u, err := a.AuthenticateToken(r.Context(), id, secret)
	if err != nil {
		return apiserver.User{}, false, err
	}
	return u, true, nil
}

// AuthenticateToken checks the token id.secret.
func (a *Authenticator) AuthenticateToken(ctx context.Context, id, secret string) (apiserver.User, error) {
	kv, err := a.Store.Get(ctx, storage.Key("", "secrets", jointoken.Namespace, jointoken.SecretPrefix+id))
	if errors.Is(err, storage.ErrNotFound) {
		a.debug("bootstrap token not found", id, nil)
		return apiserver.User{}, ErrInvalid
	}
	if err != nil {
		return apiserver.User{}, err
	}
	var s corev1.Secret
	if err := codec.Unmarshal(kv.Value, &s); err != nil {
		return apiserver.User{}, err
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	extra, err := jointoken.Check(&s, id, secret, now())
	if err != nil {
		a.debug("bootstrap token refused", id, err)
		return apiserver.User{}, ErrInvalid
	}
	return apiserver.User{User: jointoken.UserPrefix + id,
		Groups: append([]string{jointoken.GroupBootstrappers}, extra...)}, nil
}

func (a *Authenticator) debug(msg, id string, err error) {
	if a.Log != nil {
		a.Log.Debug(msg, "token-id", id, "err", err)
	}
}
