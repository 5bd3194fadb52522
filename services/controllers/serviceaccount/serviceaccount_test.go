package serviceaccount

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testCA = []byte("-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n")

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened (last error %v)", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func start(t *testing.T) (*controlplanetest.Env, kubernetes.Interface) {
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("SA_TEST_LOG"), nil)
	if _, err := New(m, Options{RootCA: testCA, KeyDir: filepath.Join(env.Dir, "pki")}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	return env, env.Client
}

// TestDefaultServiceAccountAndRootCA: every namespace (those of the
// bootstrap and new ones) gets its default ServiceAccount and
// kube-root-ca.crt; both come back when deleted, and the ConfigMap's data
// is put back when changed.
func TestDefaultServiceAccountAndRootCA(t *testing.T) {
	_, cs := start(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"default", "kube-system", "team"} {
		eventually(t, ns+" has its default ServiceAccount", func() (bool, error) {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, err
		})
		eventually(t, ns+" has kube-root-ca.crt", func() (bool, error) {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err == nil && cm.Data["ca.crt"] == string(testCA) && cm.Annotations[descriptionKey] == rootCADescription, err
		})
	}
	old, _ := cs.CoreV1().ServiceAccounts("team").Get(ctx, "default", metav1.GetOptions{})
	if err := cs.CoreV1().ServiceAccounts("team").Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted default ServiceAccount is made again", func() (bool, error) {
		sa, err := cs.CoreV1().ServiceAccounts("team").Get(ctx, "default", metav1.GetOptions{})
		return err == nil && sa.UID != old.UID, err
	})
	cm, err := cs.CoreV1().ConfigMaps("team").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"ca.crt": "tampered", "extra": "x"}
	if _, err := cs.CoreV1().ConfigMaps("team").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the changed ConfigMap is put back", func() (bool, error) {
		cm, err := cs.CoreV1().ConfigMaps("team").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil && len(cm.Data) == 1 && cm.Data["ca.crt"] == string(testCA), err
	})
	if err := cs.CoreV1().ConfigMaps("team").Delete(ctx, "kube-root-ca.crt", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted ConfigMap is made again", func() (bool, error) {
		_, err := cs.CoreV1().ConfigMaps("team").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, err
	})
}

// TestLegacyTokenSecret: a kubernetes.io/service-account-token Secret is
// filled with a token the apiserver accepts for its ServiceAccount; no
// Secret is made for a ServiceAccount unasked; the Secret of a deleted
// ServiceAccount is deleted, and its token is refused at once.
func TestLegacyTokenSecret(t *testing.T) {
	env, cs := start(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ci"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ci-token",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "ci"}}, Type: corev1.SecretTypeServiceAccountToken}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var token string
	eventually(t, "the Secret gets its token", func() (bool, error) {
		s, err := cs.CoreV1().Secrets("default").Get(ctx, "ci-token", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		token = string(s.Data["token"])
		return token != "" && string(s.Data["ca.crt"]) == string(testCA) && string(s.Data["namespace"]) == "default" &&
			s.Annotations[corev1.ServiceAccountUIDKey] != "", nil
	})
	whoami := func() (int, string) {
		req, _ := http.NewRequest("POST", env.URL+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
			strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	if code, body := whoami(); code != http.StatusCreated || !strings.Contains(body, `"username":"system:serviceaccount:default:ci"`) {
		t.Fatalf("the legacy token: %d %s", code, body)
	}
	secrets, err := cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(secrets.Items) != 1 {
		t.Errorf("secrets %v (%v), want only the one asked for", secrets, err)
	}
	if err := cs.CoreV1().ServiceAccounts("default").Delete(ctx, "ci", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the token Secret of the deleted ServiceAccount is deleted", func() (bool, error) {
		_, err := cs.CoreV1().Secrets("default").Get(ctx, "ci-token", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	if code, body := whoami(); code != http.StatusUnauthorized {
		t.Errorf("the token of a deleted ServiceAccount: %d %s", code, body)
	}
}
