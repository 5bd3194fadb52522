package pki

import (
	"crypto/ecdsa"
	"testing"
	"time"
)

func TestServiceAccountKeys(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadServiceAccountKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(k1.Verifying) != 1 || !k1.Signing.PublicKey.Equal(k1.Verifying[0]) {
		t.Fatalf("a new key pair verifies with its own public key only: %d keys", len(k1.Verifying))
	}
	again, err := LoadServiceAccountKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Signing.Equal(k1.Signing) || again.KeyID != k1.KeyID {
		t.Fatal("the key is not persisted: a second load made a new one")
	}
	if err := RotateServiceAccountKey(dir, time.Unix(1000, 0)); err != nil {
		t.Fatal(err)
	}
	k2, err := LoadServiceAccountKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k2.Signing.Equal(k1.Signing) || k2.KeyID == k1.KeyID {
		t.Fatal("rotation kept the signing key")
	}
	if len(k2.Verifying) != 2 || !k2.Signing.PublicKey.Equal(k2.Verifying[0]) || !k1.Signing.PublicKey.Equal(k2.Verifying[1].(*ecdsa.PublicKey)) {
		t.Fatalf("after rotation want the new and the old key verifying, got %d", len(k2.Verifying))
	}
}
