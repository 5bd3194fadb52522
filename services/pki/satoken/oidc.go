package satoken

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"

	"github.com/go-jose/go-jose/v4"
)

// The OIDC discovery documents kube-apiserver serves for its issuer
// (pkg/serviceaccount/openidmetadata.go), readable by anyone the RBAC role
// system:service-account-issuer-discovery is bound to (by default every
// service account).
const (
	OpenIDConfigPath = "/.well-known/openid-configuration"
	JWKSPath         = "/openid/v1/jwks"
)

// DiscoveryHandlers returns the handlers of OpenIDConfigPath and JWKSPath.
// jwksURI is the jwks_uri the configuration names; empty is the issuer's
// URL with JWKSPath (kube-apiserver's default when
// --service-account-jwks-uri is unset).
func (t *Tokens) DiscoveryHandlers(jwksURI string) (map[string]http.Handler, error) {
	if jwksURI == "" {
		u, err := url.Parse(t.issuer)
		if err != nil || u.Scheme != "https" {
			return nil, fmt.Errorf("serviceaccount: issuer %q must be an https URL to serve OIDC discovery", t.issuer)
		}
		u.Path = path.Join(u.Path, JWKSPath)
		jwksURI = u.String()
	}
	keys, err := t.JWKS()
	if err != nil {
		return nil, err
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(keys, &set); err != nil {
		return nil, err
	}
	var algs []string
	for _, k := range set.Keys {
		if !slices.Contains(algs, k.Algorithm) {
			algs = append(algs, k.Algorithm)
		}
	}
	slices.Sort(algs)
	config, err := json.Marshal(struct {
		Issuer        string   `json:"issuer"`
		JWKSURI       string   `json:"jwks_uri"`
		ResponseTypes []string `json:"response_types_supported"`
		SubjectTypes  []string `json:"subject_types_supported"`
		SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
	}{t.issuer, jwksURI, []string{"id_token"}, []string{"public"}, algs})
	if err != nil {
		return nil, err
	}
	serve := func(contentType string, body []byte) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return
			}
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Cache-Control", "public, max-age=3600")
			_, _ = w.Write(body)
		})
	}
	return map[string]http.Handler{
		OpenIDConfigPath: serve("application/json", config),
		JWKSPath:         serve("application/jwk-set+json", keys),
	}, nil
}
