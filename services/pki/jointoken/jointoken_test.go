package jointoken

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/pki"
)

func TestRoundTripAndCA(t *testing.T) {
	p, err := pki.Load(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(p.CACert)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(tok.String() + "\n")
	if err != nil || got != tok {
		t.Fatalf("Parse(%q) = %+v, %v", tok.String(), got, err)
	}
	if err := got.VerifyCA(p.CACert); err != nil {
		t.Fatal(err)
	}
	other, err := pki.Load(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.VerifyCA(other.CACert); err == nil {
		t.Fatal("another cluster's CA verified")
	}
	dir := t.TempDir()
	if err := Write(dir, tok); err != nil {
		t.Fatal(err)
	}
	if back, err := Read(dir); err != nil || back != tok {
		t.Fatalf("Read = %+v, %v", back, err)
	}
}

func TestParseErrors(t *testing.T) {
	hash := strings.Repeat("a", 64)
	for _, s := range []string{"", "abcdef.0123456789abcdef", "K10" + hash, "K10abc::abcdef.0123456789abcdef",
		"K10" + hash + "::ABCDEF.0123456789abcdef", "K10" + hash + "::abcdef.short"} {
		if _, err := Parse(s); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q) = %v, want a one-line error", s, err)
		}
	}
}

func TestCheck(t *testing.T) {
	tok := Token{CAHash: strings.Repeat("0", 64), ID: "abcdef", Secret: "0123456789abcdef"}
	asStored := func(s *corev1.Secret) *corev1.Secret {
		s.Data = map[string][]byte{}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
		return s
	}
	s := asStored(tok.BootstrapSecret("test", time.Hour, GroupServers))
	groups, err := Check(s, tok.ID, tok.Secret, time.Now())
	if err != nil || len(groups) != 1 || groups[0] != GroupServers {
		t.Fatalf("Check = %v, %v", groups, err)
	}
	if _, err := Check(s, tok.ID, "0123456789abcdee", time.Now()); err == nil {
		t.Error("wrong secret accepted")
	}
	if _, err := Check(s, tok.ID, tok.Secret, time.Now().Add(2*time.Hour)); err == nil {
		t.Error("expired token accepted")
	}
	s.Data[KeyExtraGroups] = []byte("system:masters")
	if _, err := Check(s, tok.ID, tok.Secret, time.Now()); err == nil {
		t.Error("extra group outside system:bootstrappers: accepted")
	}
}
