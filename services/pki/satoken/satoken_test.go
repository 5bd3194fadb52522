package satoken

import (
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/pki"
)

func mustTokens(t *testing.T, dir string) *Tokens {
	t.Helper()
	keys, err := pki.LoadServiceAccountKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := NewTokens("", nil, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestRotatedKeysVerify: after a rotation, tokens of the old key still
// verify (its sa-*.pub is a verifying key) and new ones are signed with the
// new key; a key that was never the cluster's does not verify, and a
// token of another issuer is not ours.
func TestRotatedKeysVerify(t *testing.T) {
	dir := t.TempDir()
	old := mustTokens(t, dir)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bot", UID: "u1"}}
	now := time.Now()
	before, err := old.IssueToken(Binding{ServiceAccount: sa}, now, 3600, 0, []string{DefaultIssuer})
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.RotateServiceAccountKey(dir, now); err != nil {
		t.Fatal(err)
	}
	rotated := mustTokens(t, dir)
	after, err := rotated.IssueToken(Binding{ServiceAccount: sa}, now, 3600, 0, []string{DefaultIssuer})
	if err != nil {
		t.Fatal(err)
	}
	stranger := mustTokens(t, t.TempDir())
	foreign, err := stranger.IssueToken(Binding{ServiceAccount: sa}, now, 3600, 0, []string{DefaultIssuer})
	if err != nil {
		t.Fatal(err)
	}
	strangerKeys, err := pki.GenerateServiceAccountKeys()
	if err != nil {
		t.Fatal(err)
	}
	otherIssuer, err := NewTokens("https://elsewhere", nil, strangerKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := otherIssuer.IssueToken(Binding{ServiceAccount: sa}, now, 3600, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, token string
		ok, ours    bool
	}{
		{"signed before the rotation", before, true, true},
		{"signed after the rotation", after, true, true},
		{"signed by a stranger", foreign, false, true},
		{"another issuer", elsewhere, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var public jwt.Claims
			var bound PrivateClaims
			var legacy LegacyClaims
			err := rotated.Verify(c.token, &public, &bound, &legacy)
			if (err == nil) != c.ok || (err == ErrNotServiceAccountToken) == c.ours {
				t.Fatalf("verify: %v (want ok %v, ours %v)", err, c.ok, c.ours)
			}
			if c.ok && (public.Subject != "system:serviceaccount:ns:bot" || bound.Kubernetes.Svcacct.UID != "u1") {
				t.Errorf("claims %+v %+v", public, bound)
			}
		})
	}
	if old.keys[0].id == rotated.keys[0].id || rotated.keys[1].id != old.keys[0].id {
		t.Errorf("key ids: old %v, rotated %v", old.keys, rotated.keys)
	}
}
