package e2etest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/cairn/up"
)

// saPod runs with the default ServiceAccount, which the admission plugin
// gives it along with the token volume.
const saPod = `apiVersion: v1
kind: Pod
metadata:
  name: sa-files
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: cairn.local/busybox:1.36
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// TestServiceAccountVolume: on the real node, a pod of the default
// ServiceAccount finds token, ca.crt and namespace in
// /var/run/secrets/kubernetes.io/serviceaccount; the token is the pod's
// (bound to it, the admission plugin's 3607 s extended as kube does), the
// apiserver takes it, and refuses it once the pod is deleted.
func TestServiceAccountVolume(t *testing.T) {
	kubectl := requireNode(t)
	bin := cairntest.Build(t)
	dataDir := t.TempDir()
	c := startCluster(t, bin, kubectl, dataDir, cairntest.FreeAddr(t))
	f := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(f, []byte(saPod), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", f)
	var pod corev1.Pod
	poll(t, podWait, "pod sa-files Ready", func() error {
		if err := json.Unmarshal([]byte(c.OK(t, "get", "pod", "sa-files", "-o", "json")), &pod); err != nil {
			return err
		}
		if !podReady(&pod) {
			return fmt.Errorf("phase %s", pod.Status.Phase)
		}
		return nil
	})
	if got := strings.Fields(c.OK(t, "exec", "sa-files", "--", "ls", saDir)); strings.Join(got, " ") != "ca.crt namespace token" {
		t.Errorf("ls %s = %q", saDir, got)
	}
	if got := c.OK(t, "exec", "sa-files", "--", "cat", saDir+"/namespace"); got != "default" {
		t.Errorf("namespace file = %q", got)
	}
	ca, err := os.ReadFile(filepath.Join(dataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.OK(t, "exec", "sa-files", "--", "cat", saDir+"/ca.crt"); got != string(ca) {
		t.Errorf("ca.crt in the pod is not the cluster CA:\n%s", got)
	}
	token := c.OK(t, "exec", "sa-files", "--", "cat", saDir+"/token")
	cl := cairntest.JWTClaims(t, token)
	k8s, _ := cl["kubernetes.io"].(map[string]any)
	boundPod, _ := k8s["pod"].(map[string]any)
	node, _ := k8s["node"].(map[string]any)
	iat, _ := cl["iat"].(float64)
	exp, _ := cl["exp"].(float64)
	warn, _ := k8s["warnafter"].(float64)
	if cl["sub"] != "system:serviceaccount:default:default" || boundPod["name"] != "sa-files" || boundPod["uid"] != string(pod.UID) ||
		node["name"] != pod.Spec.NodeName || exp-iat != 365*24*3600 || warn-iat != 3607 {
		t.Errorf("token claims %v", cl)
	}
	t.Run("the kubelet's credentials reach only what its pods use", func(t *testing.T) { c.checkNodeAuthorizer(t, pod.Spec.NodeName) })
	pods := c.WithToken(t, token)
	if got := strings.TrimSpace(pods.OK(t, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")); got != "system:serviceaccount:default:default" {
		t.Errorf("the pod's token authenticates as %q", got)
	}
	c.OK(t, "delete", "pod", "sa-files", "--wait=true", "--timeout=60s")
	poll(t, 30*time.Second, "the pod's token refused after its deletion", func() error {
		if r := pods.Run(t, "auth", "whoami"); r.Err == nil || !strings.Contains(r.Stderr, "Unauthorized") {
			return fmt.Errorf("still accepted: %s", r)
		}
		return nil
	})
}

// checkNodeAuthorizer: with the kubelet's own kubeconfig (system:node:<name>),
// the kube-root-ca.crt its pod mounts is readable, a Secret no pod of the
// node uses is not, nor may it modify another Node (403, kube's messages).
func (c *cluster) checkNodeAuthorizer(t *testing.T, node string) {
	c.OK(t, "create", "secret", "generic", "not-for-nodes", "--from-literal=k=v")
	c.RunWith(t, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"other"}}`, 0, "apply", "-f", "-")
	kubelet := *c.Kubectl
	kubelet.Kubeconfig = filepath.Join(c.DataDir, up.KubeletKubeconfig)
	if r := kubelet.Run(t, "get", "configmap", "kube-root-ca.crt"); r.Err != nil {
		t.Errorf("the kubelet reads the ConfigMap its pod mounts: %s", r)
	}
	if got := kubelet.Fails(t, "get", "secret", "not-for-nodes"); !strings.Contains(got,
		`secrets "not-for-nodes" is forbidden: User "system:node:`+node+`" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node '`+node+`' and this object`) {
		t.Errorf("the kubelet reads a Secret no pod of its uses: %q", got)
	}
	if got := kubelet.Fails(t, "label", "node", "other", "evil=yes"); !strings.Contains(got, `node "`+node+`" is not allowed to modify node "other"`) {
		t.Errorf("the kubelet labels another node: %q", got)
	}
}
