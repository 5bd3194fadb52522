package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/rbac"
)

// UserAPIServer is the apiserver's own identity on its loopback client.
const UserAPIServer = "system:apiserver"

// loopback is the apiserver's client of itself, as kube-apiserver's
// loopback client: a random bearer token for system:apiserver in
// system:masters, served in process (no network) by the apiserver's
// handler. The bootstrap reconcile and the aggregation controller write
// through it.
type loopback struct {
	token   string
	handler atomic.Pointer[http.Handler]
}

func newLoopback() (*loopback, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("controlplane: loopback token: %w", err)
	}
	return &loopback{token: hex.EncodeToString(b)}, nil
}

// Authenticate implements apiserver.Authenticator: only the loopback
// token; any other request is left to the next authenticator.
func (l *loopback) Authenticate(r *http.Request) (apiserver.User, bool, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(l.token)) != 1 {
		return apiserver.User{}, false, nil
	}
	return apiserver.User{User: UserAPIServer, Groups: []string{apiserver.GroupMasters}}, true, nil
}

// RoundTrip serves a request with the apiserver's handler. Responses are
// buffered: the loopback client does not watch.
func (l *loopback) RoundTrip(r *http.Request) (*http.Response, error) {
	h := l.handler.Load()
	if h == nil {
		return nil, fmt.Errorf("controlplane: loopback: the apiserver is not built yet")
	}
	rec := httptest.NewRecorder()
	(*h).ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// config is a rest.Config of the loopback client.
func (l *loopback) config() *rest.Config {
	return &rest.Config{Host: "http://apiserver.loopback", BearerToken: l.token, Transport: l, QPS: -1, Burst: -1,
		UserAgent: "cairn-apiserver-loopback"}
}

// authz is the RBAC side of a control plane: the caches the authorizer
// decides from, the escalation admission, the aggregation controller.
type authz struct {
	lb         *loopback
	caches     *rbac.Caches
	authorizer *rbac.Authorizer
}

func (cp *ControlPlane) newAuthz(cfg Config) (*authz, error) {
	lb, err := newLoopback()
	if err != nil {
		return nil, err
	}
	caches := rbac.NewCaches(cp.Store, cp.Hub, cfg.Log.With("component", "rbac"))
	return &authz{lb: lb, caches: caches, authorizer: rbac.NewAuthorizer(caches)}, nil
}

// start reconciles the bootstrap policy, runs the caches until they hold
// it, and runs the aggregation controller; srv must be built.
func (a *authz) start(ctx context.Context, cp *ControlPlane, srv *apiserver.Server, log *slog.Logger) error {
	h := srv.Handler()
	a.lb.handler.Store(&h)
	cs, err := kubernetes.NewForConfig(a.lb.config())
	if err != nil {
		return fmt.Errorf("controlplane: loopback client: %w", err)
	}
	if err := rbac.Reconcile(ctx, cs); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	cp.goRun("rbac caches", a.caches.Run)
	agg := rbac.NewAggregator(a.caches, cs, log.With("component", "clusterrole-aggregation"))
	if err := a.caches.WaitForSync(ctx); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	// admin, edit and view have their rules before the first request.
	if err := agg.Sync(ctx); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	cp.goRun("clusterrole aggregation", agg.Run)
	return nil
}
