package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The service-account signing key, as kubeadm keeps it: sa.key (the
// private key kube-apiserver's --service-account-signing-key-file and
// kube-controller-manager's --service-account-private-key-file name) and
// sa.pub (its public key, --service-account-key-file). A rotated key
// leaves its public key behind as sa-<unix seconds>.pub, so tokens it
// signed still verify (kube-apiserver takes several --service-account-key-file)
// until the file is removed.
const (
	ServiceAccountKeyFile = "sa.key"
	ServiceAccountPubFile = "sa.pub"
	retiredPubPrefix      = "sa-"
)

// ServiceAccountKeys are the key service-account tokens are signed with
// and every key they are verified with (the signing key's first).
type ServiceAccountKeys struct {
	Signing *ecdsa.PrivateKey
	// KeyID is the signing key's "kid" (KeyID).
	KeyID string
	// Verifying holds the public keys of the signing key and of the
	// retired keys, newest first.
	Verifying []crypto.PublicKey
}

// LoadServiceAccountKeys reads the service-account keys from dir,
// generating sa.key and sa.pub (ECDSA P-256, tokens are ES256) at the
// first start.
func LoadServiceAccountKeys(dir string) (*ServiceAccountKeys, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: create dir: %w", err)
	}
	keyPath := filepath.Join(dir, ServiceAccountKeyFile)
	b, err := os.ReadFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		if err := newServiceAccountKey(dir); err != nil {
			return nil, err
		}
		b, err = os.ReadFile(keyPath)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: read %s: %w", keyPath, err)
	}
	k, err := decodeKey(b)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", keyPath, err)
	}
	kid, err := KeyID(&k.PublicKey)
	if err != nil {
		return nil, err
	}
	keys := &ServiceAccountKeys{Signing: k, KeyID: kid, Verifying: []crypto.PublicKey{&k.PublicKey}}
	retired, err := filepath.Glob(filepath.Join(dir, retiredPubPrefix+"*.pub"))
	if err != nil {
		return nil, fmt.Errorf("pki: list retired keys: %w", err)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(retired)))
	for _, p := range retired {
		pub, err := readPublicKey(p)
		if err != nil {
			return nil, err
		}
		keys.Verifying = append(keys.Verifying, pub)
	}
	return keys, nil
}

// GenerateServiceAccountKeys makes a signing key that lives only in
// memory: tokens it signs die with the process (an apiserver without a
// data directory, in tests).
func GenerateServiceAccountKeys() (*ServiceAccountKeys, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate service-account key: %w", err)
	}
	kid, err := KeyID(&k.PublicKey)
	if err != nil {
		return nil, err
	}
	return &ServiceAccountKeys{Signing: k, KeyID: kid, Verifying: []crypto.PublicKey{&k.PublicKey}}, nil
}

// RotateServiceAccountKey replaces the signing key with a new one; the old
// public key stays as a verifying key (sa-<unix seconds>.pub). Apiservers
// pick the new keys up when they restart.
func RotateServiceAccountKey(dir string, now time.Time) error {
	pub := filepath.Join(dir, ServiceAccountPubFile)
	if _, err := os.Stat(pub); err == nil {
		retired := filepath.Join(dir, retiredPubPrefix+strconv.FormatInt(now.Unix(), 10)+".pub")
		if err := os.Rename(pub, retired); err != nil {
			return fmt.Errorf("pki: retire %s: %w", pub, err)
		}
	}
	return newServiceAccountKey(dir)
}

// newServiceAccountKey writes a new sa.pub, then sa.key (which marks a
// complete pair).
func newServiceAccountKey(dir string) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pki: generate service-account key: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return fmt.Errorf("pki: marshal service-account key: %w", err)
	}
	if err := writeFile(filepath.Join(dir, ServiceAccountPubFile), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		return err
	}
	keyPEM, err := encodeKey(k)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, ServiceAccountKeyFile), keyPEM, 0o600)
}

func readPublicKey(path string) (crypto.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pki: read %s: %w", path, err)
	}
	block, _ := pem.Decode(b)
	if block == nil || !strings.HasSuffix(block.Type, "PUBLIC KEY") {
		return nil, fmt.Errorf("pki: %s: %w", path, ErrBadPEM)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", path, err)
	}
	return pub, nil
}

// KeyID is kube's key id of a public key (pkg/serviceaccount keyIDFromPublicKey):
// the unpadded base64url SHA-256 of its PKIX DER encoding.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("pki: key id: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}
