package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/serviceaccount"
	"github.com/cairn-dev/cairn/services/pki"
	"github.com/cairn-dev/cairn/services/pki/satoken"
)

// serviceAccounts are the apiserver's service-account parts: the token
// signer (TokenRequest, OIDC discovery), the token authenticator and the
// admission plugin, over caches of ServiceAccounts, Pods and Secrets.
type serviceAccounts struct {
	tokens    *satoken.Tokens
	caches    *serviceaccount.Caches
	authn     *serviceaccount.Authenticator
	admission *serviceaccount.Admission // nil unless Config.ServiceAccountAdmission
}

func (cp *ControlPlane) newServiceAccounts(cfg Config, extra map[string]http.Handler) (*serviceAccounts, error) {
	var keys *pki.ServiceAccountKeys
	var err error
	switch {
	case cfg.ServiceAccountKeyDir != "":
		keys, err = pki.LoadServiceAccountKeys(cfg.ServiceAccountKeyDir)
	case cfg.DataDir != "":
		keys, err = pki.LoadServiceAccountKeys(filepath.Join(cfg.DataDir, "pki"))
	default:
		keys, err = pki.GenerateServiceAccountKeys()
	}
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	tokens, err := satoken.NewTokens(cfg.ServiceAccountIssuer, cfg.APIAudiences, keys, nil)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	handlers, err := tokens.DiscoveryHandlers("")
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	for p, h := range handlers {
		extra[p] = h
	}
	caches := serviceaccount.NewCaches(cp.Store, cp.Hub, cfg.Log.With("component", "serviceaccount-caches"))
	sa := &serviceAccounts{tokens: tokens, caches: caches, authn: &serviceaccount.Authenticator{Tokens: tokens, Caches: caches,
		Log: cfg.Log.With("component", "serviceaccount-authenticator")}}
	if cfg.ServiceAccountAdmission {
		sa.admission = &serviceaccount.Admission{Caches: caches}
	}
	return sa, nil
}

// plugins are the admission plugins to run.
func (sa *serviceAccounts) plugins() []apiserver.AdmissionPlugin {
	if sa.admission == nil {
		return nil
	}
	return []apiserver.AdmissionPlugin{sa.admission}
}

// start runs the caches until they hold their first snapshot.
func (sa *serviceAccounts) start(ctx context.Context, cp *ControlPlane) error {
	cp.goRun("serviceaccount caches", sa.caches.Run)
	if err := sa.caches.WaitForSync(ctx); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	return nil
}
