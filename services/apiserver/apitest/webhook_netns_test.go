package apitest

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/netns"
	"github.com/cairn-dev/cairn/services/pki"
)

// podAddr is the "pod" address inside the test's namespace: from
// TEST-NET-1, which the host does not have; it exists only in that
// namespace, on its loopback device.
const podAddr = "192.0.2.77"

// newTestNetNS creates a network namespace with its loopback up and
// podAddr on it, deleted at cleanup; skipped without root.
func newTestNetNS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	name := fmt.Sprintf("cairn-wh-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete: %v: %s", err, out)
		}
	})
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	if out, err := exec.Command("ip", "-n", name, "addr", "add", podAddr+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	return filepath.Join("/run/netns", name)
}

// serveTLS serves h with cert on ln.
func serveTLS(t *testing.T, ln net.Listener, cert tls.Certificate, h http.Handler) {
	s := httptest.NewUnstartedServer(h)
	s.Listener.Close()
	s.Listener = ln
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.StartTLS()
	t.Cleanup(s.Close)
}

// startNetNSWebhookEnv starts a control plane that knows one node,
// node-a, whose pods live in a network namespace the test creates, and a
// CA with a serving certificate for the webhook's serving name.
func startNetNSWebhookEnv(t *testing.T, serverName string) (env *controlplanetest.Env, nsPath string, ca *pki.PKI, cert tls.Certificate) {
	t.Helper()
	nsPath = newTestNetNS(t)
	env = controlplanetest.Start(t, controlplanetest.Options{NodeNetNS: func(node string) (string, bool) {
		return nsPath, node == "node-a"
	}})
	ca, err := pki.Load(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing(strings.Split(serverName, ".")[0], []string{serverName})
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return env, nsPath, ca, cert
}

// TestServiceWebhookThroughNodeNetNS calls a webhook given as a service
// reference: the Service's ready endpoint is an address inside a network
// namespace the test creates (standing for a node's pod network), which
// the apiserver dials from inside that namespace: the host has no such
// address. An endpoint on a node whose namespace the apiserver does not
// know is not dialed at all.
func TestServiceWebhookThroughNodeNetNS(t *testing.T) {
	env, nsPath, ca, cert := startNetNSWebhookEnv(t, "hook.webhooks.svc")
	var err error
	inside := startHookTB(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return patchResponse(`[{"op":"add","path":"/metadata/labels","value":{"reached":"netns"}}]`)
	})
	inside.Close() // only its handler is used, on the namespace's listener
	ln, err := netns.Listen(nsPath, "tcp", podAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	serveTLS(t, ln, cert, inside.Config.Handler)

	ctx := ctxFor(t, 2*time.Minute)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "webhooks"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"hook", "elsewhere"} {
		if _, err := env.Client.CoreV1().Services("webhooks").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(port))}}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	slice := func(svc, node string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svc + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(port))}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{podAddr}, NodeName: ptr(node),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}}}
	}
	for _, s := range []*discoveryv1.EndpointSlice{slice("hook", "node-a"), slice("elsewhere", "node-b")} {
		if _, err := env.Client.DiscoveryV1().EndpointSlices("webhooks").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hook := func(name, svc string, nsSel map[string]string) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{Name: name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: ca.CAPEM,
				Service: &admissionregistrationv1.ServiceReference{Namespace: "webhooks", Name: svc, Path: ptr("/mutate")}},
			Rules: podCreateRule, SideEffects: ptr(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: nsSel}}
	}
	for _, ns := range []string{"via-a", "via-b"} {
		if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"route": ns}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	addMutating(t, env, "service-hooks", hook("hook.cairn.test", "hook", map[string]string{"route": "via-a"}),
		hook("elsewhere.cairn.test", "elsewhere", map[string]string{"route": "via-b"}))

	// The caches learn of the Service and its slice from the log.
	var got *corev1.Pod
	controlplanetest.Eventually(t, time.Minute, "the webhook reached in the namespace", func() bool {
		got, err = createPod(t, env, "via-a", testPod("p"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})
	if got.Labels["reached"] != "netns" {
		t.Fatalf("labels %v", got.Labels)
	}
	_, err = createPod(t, env, "via-b", testPod("p"), metav1.CreateOptions{})
	wantStatus(t, err, http.StatusInternalServerError, `failed calling webhook "elsewhere.cairn.test": failed to call webhook: Post "https://elsewhere.webhooks.svc:443/mutate?timeout=10s": webhook: no network namespace is known for node "node-b"`)
}
