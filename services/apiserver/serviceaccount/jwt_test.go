package serviceaccount

import (
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/apiserver"
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
	before, err := old.IssueToken(apiserver.TokenBinding{ServiceAccount: sa}, now, 3600, 0, []string{DefaultIssuer})
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.RotateServiceAccountKey(dir, now); err != nil {
		t.Fatal(err)
	}
	rotated := mustTokens(t, dir)
	after, err := rotated.IssueToken(apiserver.TokenBinding{ServiceAccount: sa}, now, 3600, 0, []string{DefaultIssuer})
	if err != nil {
		t.Fatal(err)
	}
	stranger := mustTokens(t, t.TempDir())
	foreign, err := stranger.IssueToken(apiserver.TokenBinding{ServiceAccount: sa}, now, 3600, 0, []string{DefaultIssuer})
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
	elsewhere, err := otherIssuer.IssueToken(apiserver.TokenBinding{ServiceAccount: sa}, now, 3600, 0, nil)
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
			var bound privateClaims
			var legacy legacyClaims
			err := rotated.verify(c.token, &public, &bound, &legacy)
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

// TestMountToken: every container gets the volume, except one with
// something mounted at the token path already; a pod with a
// kube-api-access-* volume keeps it.
func TestMountToken(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a"},
		{Name: "own", VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: TokenMountPath}}},
	}}}
	mountToken(pod)
	if len(pod.Spec.Volumes) != 1 || len(pod.Spec.Containers[0].VolumeMounts) != 1 || len(pod.Spec.Containers[1].VolumeMounts) != 1 ||
		pod.Spec.Containers[1].VolumeMounts[0].Name != "mine" {
		t.Fatalf("pod %+v", pod.Spec)
	}
	name := pod.Spec.Volumes[0].Name
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "late"})
	mountToken(pod)
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Containers[2].VolumeMounts[0].Name != name {
		t.Errorf("second mount: %+v", pod.Spec)
	}
}
