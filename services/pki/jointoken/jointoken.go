// Package jointoken is the secret that lets servers and nodes join a
// cluster, in the shape k3s gives its node token:
//
//	K10<sha256 of the cluster CA certificate, hex>::<id>.<secret>
//
// The part after "::" is a Kubernetes bootstrap token (kubeadm's format: a
// 6-character id and a 16-character secret of [a-z0-9]). It lives as the
// Secret kube-system/bootstrap-token-<id> of type
// bootstrap.kubernetes.io/token, so the apiserver authenticates it as kube
// does (user system:bootstrap:<id>, groups system:bootstrappers and the
// Secret's auth-extra-groups). The CA hash lets a joiner verify the server
// it talks to before it trusts anything the server says, as kubeadm's
// --discovery-token-ca-cert-hash does.
package jointoken

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kube's names for bootstrap tokens (k8s.io/cluster-bootstrap/token/api).
const (
	SecretType         corev1.SecretType = "bootstrap.kubernetes.io/token"
	SecretPrefix                         = "bootstrap-token-"
	Namespace                            = metav1.NamespaceSystem
	KeyID                                = "token-id"
	KeySecret                            = "token-secret"
	KeyExpiration                        = "expiration"
	KeyDescription                       = "description"
	KeyExtraGroups                       = "auth-extra-groups"
	KeyUsageAuth                         = "usage-bootstrap-authentication"
	KeyUsageSigning                      = "usage-bootstrap-signing"
	UserPrefix                           = "system:bootstrap:"
	GroupBootstrappers                   = "system:bootstrappers"
	// GroupServers is the extra group of a token that may also join
	// servers (it carries the cluster's CA key to the joiner): the
	// --cluster-init token has it.
	GroupServers = "system:bootstrappers:cairn:servers"
	// GroupNodes is the extra group of a node-only token.
	GroupNodes = "system:bootstrappers:cairn:nodes"

	prefix = "K10"
)

var (
	bootstrapRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)
	hashRE      = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Token is a parsed join token.
type Token struct {
	// CAHash is the hex SHA-256 of the CA certificate's DER bytes.
	CAHash string
	ID     string
	Secret string
}

// String formats the token as users pass it to --join-token.
func (t Token) String() string { return prefix + t.CAHash + "::" + t.ID + "." + t.Secret }

// Bootstrap is the bootstrap-token part, as a bearer token.
func (t Token) Bootstrap() string { return t.ID + "." + t.Secret }

// SecretName is the name of the token's Secret in kube-system.
func (t Token) SecretName() string { return SecretPrefix + t.ID }

// Parse reads a join token; its error says in one line what is wrong.
func Parse(s string) (Token, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return Token{}, errors.New("join token: does not start with K10 (want K10<ca-hash>::<id>.<secret>)")
	}
	hash, boot, ok := strings.Cut(rest, "::")
	if !ok {
		return Token{}, errors.New("join token: no \"::\" (want K10<ca-hash>::<id>.<secret>)")
	}
	if !hashRE.MatchString(hash) {
		return Token{}, errors.New("join token: the CA hash is not 64 hex digits")
	}
	m := bootstrapRE.FindStringSubmatch(boot)
	if m == nil {
		return Token{}, errors.New("join token: the part after \"::\" is not <6 of [a-z0-9]>.<16 of [a-z0-9]>")
	}
	return Token{CAHash: hash, ID: m[1], Secret: m[2]}, nil
}

// ParseBootstrap reads a bare bootstrap token (<id>.<secret>).
func ParseBootstrap(s string) (id, secret string, ok bool) {
	m := bootstrapRE.FindStringSubmatch(s)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// CAHash is the hash a token carries for the CA certificate ca.
func CAHash(ca *x509.Certificate) string {
	sum := sha256.Sum256(ca.Raw)
	return hex.EncodeToString(sum[:])
}

// VerifyCA checks that ca is the CA the token names.
func (t Token) VerifyCA(ca *x509.Certificate) error {
	if subtle.ConstantTimeCompare([]byte(CAHash(ca)), []byte(t.CAHash)) != 1 {
		return errors.New("join token: the server's CA is not the one the token names (another cluster?)")
	}
	return nil
}

// New makes a token with a fresh random id and secret for the CA ca.
func New(ca *x509.Certificate) (Token, error) {
	id, err := randomString(6)
	if err != nil {
		return Token{}, err
	}
	secret, err := randomString(16)
	if err != nil {
		return Token{}, err
	}
	return Token{CAHash: CAHash(ca), ID: id, Secret: secret}, nil
}

const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

func randomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("join token: %w", err)
	}
	for i := range b {
		// 256 % 36 != 0 leaves a slight bias, as kubeadm's generator
		// avoids by rejection: do the same.
		for b[i] >= 252 {
			if _, err := rand.Read(b[i : i+1]); err != nil {
				return "", fmt.Errorf("join token: %w", err)
			}
		}
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b), nil
}

// BootstrapSecret is the kube-system Secret that makes the token
// authenticate, with the extra groups given (GroupServers, GroupNodes).
// A zero ttl never expires.
func (t Token) BootstrapSecret(description string, ttl time.Duration, groups ...string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: t.SecretName(), Namespace: Namespace},
		Type:       SecretType,
		StringData: map[string]string{
			KeyID:           t.ID,
			KeySecret:       t.Secret,
			KeyDescription:  description,
			KeyUsageAuth:    "true",
			KeyUsageSigning: "true",
		},
	}
	if len(groups) > 0 {
		s.StringData[KeyExtraGroups] = strings.Join(groups, ",")
	}
	if ttl > 0 {
		s.StringData[KeyExpiration] = time.Now().Add(ttl).UTC().Format(time.RFC3339)
	}
	return s
}

// Check validates a bootstrap token id.secret against its Secret as kube's
// bootstrap authenticator does: the type, the secret (in constant time),
// the authentication usage and the expiry. It returns the extra groups.
func Check(s *corev1.Secret, id, secret string, now time.Time) (groups []string, err error) {
	if s.Type != SecretType || s.Name != SecretPrefix+id {
		return nil, errors.New("not a bootstrap token secret")
	}
	get := func(k string) string {
		if v, ok := s.Data[k]; ok {
			return string(v)
		}
		return s.StringData[k]
	}
	if subtle.ConstantTimeCompare([]byte(get(KeySecret)), []byte(secret)) != 1 || get(KeyID) != id {
		return nil, errors.New("bootstrap token: wrong secret")
	}
	if s.DeletionTimestamp != nil {
		return nil, errors.New("bootstrap token: being deleted")
	}
	if get(KeyUsageAuth) != "true" {
		return nil, errors.New("bootstrap token: not for authentication")
	}
	if exp := get(KeyExpiration); exp != "" {
		t, err := time.Parse(time.RFC3339, exp)
		if err != nil {
			return nil, fmt.Errorf("bootstrap token: expiration %q: %w", exp, err)
		}
		if !now.Before(t) {
			return nil, errors.New("bootstrap token: expired")
		}
	}
	for _, g := range strings.Split(get(KeyExtraGroups), ",") {
		if g = strings.TrimSpace(g); g != "" {
			if !strings.HasPrefix(g, "system:bootstrappers:") {
				return nil, fmt.Errorf("bootstrap token: extra group %q is not under system:bootstrappers:", g)
			}
			groups = append(groups, g)
		}
	}
	return groups, nil
}

// FileName is the file in a server's data directory holding its token.
const FileName = "join-token"

// Read reads the token file of a data directory.
func Read(dataDir string) (Token, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, FileName))
	if err != nil {
		return Token{}, fmt.Errorf("join token: %w", err)
	}
	return Parse(string(b))
}

// Write writes the token file of a data directory (mode 0600).
func Write(dataDir string, t Token) error {
	p := filepath.Join(dataDir, FileName)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(t.String()+"\n"), 0o600); err != nil {
		return fmt.Errorf("join token: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("join token: %w", err)
	}
	return nil
}
