package satoken

import (
	"crypto"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/pki"
)

// Issuers of service-account tokens.
const (
	// DefaultIssuer is the iss of bound tokens (kube-apiserver's
	// --service-account-issuer, kubeadm's value), and by default the
	// apiserver's only audience.
	DefaultIssuer = "https://kubernetes.default.svc.cluster.local"
	// LegacyIssuer is the iss of the tokens of kubernetes.io/service-account-token
	// Secrets.
	LegacyIssuer = "kubernetes/serviceaccount"
)

// Names of kube's service-account plumbing: the ServiceAccount every
// namespace gets, and the ConfigMap of the cluster CA in every namespace
// (kube-root-ca.crt, its key ca.crt), which token volumes project.
const (
	DefaultServiceAccountName = "default"
	RootCAConfigMap           = "kube-root-ca.crt"
	RootCAKey                 = "ca.crt"
)

// Users and groups of service accounts, as kube spells them.
const (
	UserPrefix      = "system:serviceaccount:"
	GroupAll        = "system:serviceaccounts"
	GroupNamePrefix = "system:serviceaccounts:"
)

// UserName is the user name of a service account.
func UserName(namespace, name string) string { return UserPrefix + namespace + ":" + name }

// SplitUserName is kube's SplitUsername: namespace and name of a
// service-account user name.
func SplitUserName(user string) (namespace, name string, err error) {
	rest, ok := strings.CutPrefix(user, UserPrefix)
	parts := strings.Split(rest, ":")
	if !ok || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", "", errors.New("serviceaccount: username is not a service account")
	}
	return parts[0], parts[1], nil
}

// Groups are the groups of a service account of namespace.
func Groups(namespace string) []string { return []string{GroupAll, GroupNamePrefix + namespace} }

// PrivateClaims are kube's bound-token claims (pkg/serviceaccount/claims.go).
type PrivateClaims struct {
	Kubernetes KubernetesClaims `json:"kubernetes.io,omitempty"`
}

type KubernetesClaims struct {
	Namespace string           `json:"namespace,omitempty"`
	Svcacct   Ref              `json:"serviceaccount,omitzero"`
	Pod       *Ref             `json:"pod,omitempty"`
	Secret    *Ref             `json:"secret,omitempty"`
	Node      *Ref             `json:"node,omitempty"`
	WarnAfter *jwt.NumericDate `json:"warnafter,omitempty"`
}

type Ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// LegacyClaims are the claims of a Secret's token (pkg/serviceaccount/legacy.go).
type LegacyClaims struct {
	ServiceAccountName string `json:"kubernetes.io/serviceaccount/service-account.name"`
	ServiceAccountUID  string `json:"kubernetes.io/serviceaccount/service-account.uid"`
	SecretName         string `json:"kubernetes.io/serviceaccount/secret.name"`
	Namespace          string `json:"kubernetes.io/serviceaccount/namespace"`
}

// Tokens signs and verifies service-account tokens with the cluster's
// service-account keys (pki.ServiceAccountKeys): ES256 JWTs whose kid is
// the key's pki.KeyID. It is the apiserver's TokenIssuer. Safe for
// concurrent use.
type Tokens struct {
	issuer    string
	audiences []string
	signer    jose.Signer
	keys      []verifyingKey
	now       func() time.Time
}

type verifyingKey struct {
	id  string
	key crypto.PublicKey
}

// Binding is what a token is bound to: its ServiceAccount, and a pod (with
// its node) or a secret, or nothing else.
type Binding struct {
	ServiceAccount *corev1.ServiceAccount
	Pod            *corev1.Pod
	Node           *corev1.Node
	Secret         *corev1.Secret
}

// NewTokens builds the signer of issuer; audiences are the apiserver's
// (nil means just the issuer, as kube-apiserver defaults --api-audiences).
func NewTokens(issuer string, audiences []string, keys *pki.ServiceAccountKeys, now func() time.Time) (*Tokens, error) {
	if issuer == "" {
		issuer = DefaultIssuer
	}
	if len(audiences) == 0 {
		audiences = []string{issuer}
	}
	if now == nil {
		now = time.Now
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: keys.Signing, KeyID: keys.KeyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("serviceaccount: signer: %w", err)
	}
	t := &Tokens{issuer: issuer, audiences: audiences, signer: signer, now: now}
	for _, k := range keys.Verifying {
		id, err := pki.KeyID(k)
		if err != nil {
			return nil, err
		}
		t.keys = append(t.keys, verifyingKey{id: id, key: k})
	}
	return t, nil
}

// Issuer is the iss of bound tokens.
func (t *Tokens) Issuer() string { return t.issuer }

// Audiences implements apiserver.TokenIssuer.
func (t *Tokens) Audiences() []string { return append([]string(nil), t.audiences...) }

// IssueToken implements apiserver.TokenIssuer with kube's claims: iss,
// sub, aud, iat, nbf, exp, jti, and kubernetes.io with the namespace, the
// service account, and the pod (and its node) or secret bound to.
func (t *Tokens) IssueToken(b Binding, now time.Time, expirationSeconds, warnAfter int64, audiences []string) (string, error) {
	sa := b.ServiceAccount
	if b.Secret != nil && (b.Pod != nil || b.Node != nil) {
		return "", errors.New("internal error, token can only be bound to one object type")
	}
	public := jwt.Claims{
		Issuer:    t.issuer,
		Subject:   UserName(sa.Namespace, sa.Name),
		Audience:  jwt.Audience(audiences),
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		Expiry:    jwt.NewNumericDate(now.Add(time.Duration(expirationSeconds) * time.Second)),
		ID:        uuid.NewString(),
	}
	private := PrivateClaims{Kubernetes: KubernetesClaims{Namespace: sa.Namespace, Svcacct: Ref{Name: sa.Name, UID: string(sa.UID)}}}
	switch {
	case b.Pod != nil:
		private.Kubernetes.Pod = &Ref{Name: b.Pod.Name, UID: string(b.Pod.UID)}
		if b.Node != nil {
			private.Kubernetes.Node = &Ref{Name: b.Node.Name, UID: string(b.Node.UID)}
		}
	case b.Secret != nil:
		private.Kubernetes.Secret = &Ref{Name: b.Secret.Name, UID: string(b.Secret.UID)}
	case b.Node != nil:
		private.Kubernetes.Node = &Ref{Name: b.Node.Name, UID: string(b.Node.UID)}
	}
	if warnAfter != 0 {
		private.Kubernetes.WarnAfter = jwt.NewNumericDate(now.Add(time.Duration(warnAfter) * time.Second))
	}
	return jwt.Signed(t.signer).Claims(public).Claims(private).Serialize()
}

// LegacyToken signs the non-expiring token of a kubernetes.io/service-account-token
// Secret, as kube's token controller does.
func (t *Tokens) LegacyToken(sa *corev1.ServiceAccount, secret *corev1.Secret) (string, error) {
	public := jwt.Claims{Issuer: LegacyIssuer, Subject: UserName(sa.Namespace, sa.Name)}
	private := LegacyClaims{ServiceAccountName: sa.Name, ServiceAccountUID: string(sa.UID), SecretName: secret.Name, Namespace: sa.Namespace}
	return jwt.Signed(t.signer).Claims(public).Claims(private).Serialize()
}

// ErrNotServiceAccountToken means a bearer token is not a JWT of ours: the
// authenticator leaves it to the next one.
var ErrNotServiceAccountToken = errors.New("serviceaccount: not a service-account token")

// Verify checks the signature of a token whose issuer is one of ours and
// decodes its claims into public and private. A token that is no JWT or
// names another issuer is ErrNotServiceAccountToken.
func (t *Tokens) Verify(raw string, public *jwt.Claims, bound *PrivateClaims, legacy *LegacyClaims) error {
	if strings.Count(raw, ".") != 2 {
		return ErrNotServiceAccountToken
	}
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512})
	if err != nil {
		return ErrNotServiceAccountToken
	}
	var unverified struct {
		Issuer string `json:"iss"`
	}
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return ErrNotServiceAccountToken
	}
	if unverified.Issuer != t.issuer && unverified.Issuer != LegacyIssuer {
		return ErrNotServiceAccountToken
	}
	kid := ""
	if len(tok.Headers) > 0 {
		kid = tok.Headers[0].KeyID
	}
	var errs []error
	for _, k := range t.keys {
		// Like kube, a token naming a kid is only tried with that key.
		if kid != "" && kid != k.id {
			continue
		}
		if err := tok.Claims(k.key, public, bound, legacy); err != nil {
			errs = append(errs, err)
			continue
		}
		return nil
	}
	if len(errs) == 0 {
		return errors.New("serviceaccount: no key verifies the token")
	}
	return errors.Join(errs...)
}

// JWKS is the JSON Web Key Set of the verifying keys (/openid/v1/jwks).
func (t *Tokens) JWKS() ([]byte, error) {
	set := jose.JSONWebKeySet{}
	for _, k := range t.keys {
		alg := ""
		if ec, ok := k.key.(*ecdsa.PublicKey); ok {
			alg = map[int]string{256: string(jose.ES256), 384: string(jose.ES384), 521: string(jose.ES512)}[ec.Curve.Params().BitSize]
		} else {
			alg = string(jose.RS256)
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key, KeyID: k.id, Algorithm: alg, Use: "sig"})
	}
	return json.Marshal(set)
}
