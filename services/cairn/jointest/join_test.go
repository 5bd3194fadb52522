package jointest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/cairn/join"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
	"github.com/cairn-dev/cairn/services/pki"
	"github.com/cairn-dev/cairn/services/pki/csrtest"
	"github.com/cairn-dev/cairn/services/pki/jointoken"
)

func TestJoinAndFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two servers and a node")
	}
	bin := cairntest.Build(t)
	etcd := embeddedtest.StartEtcd(t)
	nt := embeddedtest.StartNATS(t)
	_, port, _ := net.SplitHostPort(cairntest.FreeAddr(t))
	addrA, addrB := net.JoinHostPort("127.0.0.2", port), net.JoinHostPort("127.0.0.3", port)
	dataA := t.TempDir()
	upA := cairntest.StartUp(t, t, cairntest.UpConfig{Bin: bin, DataDir: dataA, Addr: addrA, StopTimeout: 30 * time.Second,
		Args: []string{"--node=false", "--etcd-endpoints", etcd.Endpoint(), "--nats-url", nt.URL(), "--tls-san", "127.0.0.3", "--advertise-address", "127.0.0.2"}})
	admin := func() *rest.Config {
		rc, err := clientcmd.BuildConfigFromFlags("", upA.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	upA.WaitReady(t, 3*time.Minute, func() error { return readyz(ctx, admin()) })
	client := kubernetes.NewForConfigOrDie(admin())

	srvB := cairntest.NewProc(t, "apiserver-b", bin, "apiserver", "--etcd-endpoints", etcd.Endpoint(), "--nats-url", nt.URL(),
		"--listen", addrB, "--pki-dir", filepath.Join(dataA, "pki"), "--identity", "server-b", "--advertise-address", "127.0.0.3")
	srvB.Start()
	rcB := admin()
	rcB.Host = "https://" + addrB
	waitFor(t, 60*time.Second, "apiserver B ready", func() error {
		srvB.Alive()
		return readyz(ctx, rcB)
	})

	anonymous := &rest.Config{Host: "https://" + addrB, TLSClientConfig: rest.TLSClientConfig{CAData: admin().CAData}}
	t.Run("AnonymousCannotCreateCSR", func(t *testing.T) {
		anon := kubernetes.NewForConfigOrDie(anonymous)
		_, err := anon.CertificatesV1().CertificateSigningRequests().Create(ctx, testCSR(t, "anon-csr"), metav1.CreateOptions{})
		// cairn serves system:anonymous only its public paths
		// (/healthz, /version, /cacerts...); elsewhere a request without
		// credentials is 401, as kube-apiserver's with --anonymous-auth=false.
		if !apierrors.IsUnauthorized(err) {
			t.Fatalf("anonymous create CSR: %v, want 401 Unauthorized", err)
		}
		if _, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, "anon-csr", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the anonymous CSR was written: %v", err)
		}
	})

	res := cairntest.Run(t, time.Minute, bin, "token", "create", "--kubeconfig", upA.Kubeconfig(), "--ttl", "1h")
	if res.Err != nil {
		t.Fatalf("cairn token create: %s", res)
	}
	tok, err := jointoken.Parse(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("cairn token create printed %q: %v", res.Stdout, err)
	}

	t.Run("WrongTokenRefused", func(t *testing.T) {
		bad := tok
		bad.Secret = strings.Repeat("x", len(tok.Secret))
		other, err := pki.Load(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		otherCA := tok
		otherCA.CAHash = jointoken.CAHash(other.CACert)
		for _, c := range []struct {
			name, token, want string
		}{
			{"wrong-secret", bad.String(), "refused the join token"},
			{"other-ca", otherCA.String(), "CA"},
		} {
			dir := t.TempDir()
			res := cairntest.Run(t, 2*time.Minute, bin, "agent", "--join", "https://"+addrB, "--join-token", c.token,
				"--node-name", c.name, "--runtime", "hollow", "--data-dir", dir)
			if res.Err == nil {
				t.Fatalf("%s: the join succeeded: %s", c.name, res)
			}
			msg := strings.TrimSpace(res.Stderr)
			if !strings.Contains(msg, c.want) || strings.Count(msg, "\n") > 0 {
				t.Errorf("%s: stderr %q, want one line with %q", c.name, msg, c.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Errorf("%s: the refused join wrote %v in its data dir", c.name, names(ents))
			}
			if _, err := client.CoreV1().Nodes().Get(ctx, c.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s: node exists after a refused join: %v", c.name, err)
			}
		}
		csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil || len(csrs.Items) != 0 {
			t.Fatalf("CSRs after refused joins: %v %v", csrs, err)
		}
	})

	const node = "joined-0"
	nodeData := t.TempDir()
	agent := cairntest.NewProc(t, "agent", bin, "agent", "--join", "https://"+addrB, "--join-token", tok.String(),
		"--node-name", node, "--runtime", "hollow", "--data-dir", nodeData)
	agent.Start()
	t.Run("CSRFlow", func(t *testing.T) {
		waitFor(t, 90*time.Second, "node Ready", func() error {
			agent.Alive()
			return nodeReady(ctx, client, node)
		})
		csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		signers := map[string]bool{}
		for _, c := range csrs.Items {
			signers[c.Spec.SignerName] = true
			if want := jointoken.UserPrefix + tok.ID; c.Spec.Username != want {
				t.Errorf("CSR %s: requestor %q, want %q", c.Name, c.Spec.Username, want)
			}
			if !slices.Contains(c.Spec.Groups, jointoken.GroupBootstrappers) {
				t.Errorf("CSR %s: groups %v lack %s", c.Name, c.Spec.Groups, jointoken.GroupBootstrappers)
			}
			if !condition(c, certificatesv1.CertificateApproved) || len(c.Status.Certificate) == 0 {
				t.Errorf("CSR %s: not approved and issued: %+v", c.Name, c.Status.Conditions)
			}
		}
		if len(csrs.Items) != 2 || !signers[certificatesv1.KubeAPIServerClientKubeletSignerName] || !signers[certificatesv1.KubeAPIServerClientSignerName] {
			t.Fatalf("CSRs %v, want one for the kubelet and one for the proxy", signers)
		}
		// The node's own certificate: system:node:<name>, signed by the
		// cluster CA.
		kc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(join.NodeDir(nodeData, node), join.KubeconfigFile))
		if err != nil {
			t.Fatal(err)
		}
		// It names the certificate store's current file, which rotation
		// renews.
		if want := filepath.Join(join.NodeDir(nodeData, node), join.CertDir, join.KubeletCertPrefix+"-current.pem"); kc.CertFile != want || kc.KeyFile != want {
			t.Errorf("node kubeconfig certificate %q key %q, want both %q", kc.CertFile, kc.KeyFile, want)
		}
		if err := rest.LoadTLSFiles(kc); err != nil {
			t.Fatal(err)
		}
		cert := csrtest.ParseCert(t, kc.CertData)
		if cert.Subject.CommonName != "system:node:"+node || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
			t.Errorf("node certificate subject %v", cert.Subject)
		}
		if err := cert.CheckSignatureFrom(csrtest.ParseCert(t, admin().CAData)); err != nil {
			t.Errorf("node certificate not signed by the cluster CA: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("Failover", func(t *testing.T) {
		nodeDir := join.NodeDir(nodeData, node)
		waitFor(t, 60*time.Second, "servers.json lists both apiservers", func() error {
			s, err := join.ReadServers(nodeDir)
			if err != nil {
				return err
			}
			if !slices.Contains(s.APIServers, addrA) || !slices.Contains(s.APIServers, addrB) {
				return fmt.Errorf("servers.json %v", s.APIServers)
			}
			if len(s.NATS) == 0 {
				return errors.New("servers.json names no NATS URL")
			}
			return nil
		})
		srvB.Kill()
		killed := time.Now()
		waitFor(t, 90*time.Second, "the node's Lease renewed after B died", func() error {
			agent.Alive()
			l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(killed.Add(time.Second)) {
				return fmt.Errorf("lease renewed at %v, B killed at %v", l.Spec.RenewTime, killed)
			}
			return nil
		})
		if l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{}); err == nil {
			// The kubelet renews every 10 s: the figure is bounded by that.
			t.Logf("first Lease renewal through A %v after B was killed", l.Spec.RenewTime.Sub(killed).Round(time.Millisecond))
		}
		if err := nodeReady(ctx, client, node); err != nil {
			t.Fatal(err)
		}
		if out := agent.Output(); !strings.Contains(out, "failing over") {
			t.Errorf("the agent's log does not say it failed over:\n%s", cairntest.Tail(out, 30))
		}
	})

	t.Run("RestartReusesCertificate", func(t *testing.T) {
		agent.Interrupt(30 * time.Second)
		agent.Start()
		waitFor(t, 60*time.Second, "the restarted node heartbeats", func() error {
			agent.Alive()
			if !strings.Contains(agent.Output(), "kubelet running hollow node") {
				return errors.New("not running yet")
			}
			return nodeReady(ctx, client, node)
		})
		if out := agent.Output(); strings.Contains(out, "credentials issued") {
			t.Errorf("the restarted node bootstrapped again:\n%s", cairntest.Tail(out, 20))
		}
		csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil || len(csrs.Items) != 2 {
			t.Fatalf("CSRs after the restart: %d %v, want the 2 of the first start", len(csrs.Items), err)
		}
	})

	t.Run("CertificateRotation", func(t *testing.T) {
		// The node's certificate is replaced, while it is stopped, by one
		// that is past its rotation deadline and expires in a minute:
		// started again, the kubelet must get a new one through a CSR
		// with its current credentials and switch its connections to it
		// before the old one expires.
		agent.Interrupt(30 * time.Second)
		nodeDir := join.NodeDir(nodeData, node)
		expires := seedExpiringCertificate(t, filepath.Join(dataA, "pki"), nodeDir, node, time.Minute)
		store, err := join.KubeletCertStore(nodeDir)
		if err != nil {
			t.Fatal(err)
		}
		seeded, err := store.Current()
		if err != nil {
			t.Fatal(err)
		}
		agent.Start()
		waitFor(t, 90*time.Second, "a renewed certificate in the store", func() error {
			agent.Alive()
			c, err := store.Current()
			if err != nil {
				return err
			}
			if c.Leaf.SerialNumber.Cmp(seeded.Leaf.SerialNumber) == 0 {
				return errors.New("still the seeded certificate")
			}
			return nil
		})
		renewed, _ := store.Current()
		if renewed.Leaf.Subject.CommonName != "system:node:"+node || !renewed.Leaf.NotAfter.After(expires.Add(time.Hour)) {
			t.Errorf("renewed certificate %v valid until %v", renewed.Leaf.Subject, renewed.Leaf.NotAfter)
		}
		csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var selfRenewed bool
		for _, c := range csrs.Items {
			if c.Spec.Username == "system:node:"+node && condition(c, certificatesv1.CertificateApproved) && len(c.Status.Certificate) > 0 {
				selfRenewed = true
			}
		}
		if !selfRenewed {
			t.Fatalf("no CSR of system:node:%s approved and issued among %d", node, len(csrs.Items))
		}
		// Past the old certificate's end, the node still renews its
		// Lease: its connections present the new one.
		time.Sleep(time.Until(expires))
		waitFor(t, 60*time.Second, "a Lease renewal after the old certificate expired", func() error {
			agent.Alive()
			l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(expires.Add(time.Second)) {
				return fmt.Errorf("lease renewed at %v, the old certificate expired at %v", l.Spec.RenewTime, expires)
			}
			return nil
		})
		if err := nodeReady(ctx, client, node); err != nil {
			t.Fatal(err)
		}
		if out := agent.Output(); !strings.Contains(out, "client certificate rotated") {
			t.Errorf("the agent's log does not say it rotated its certificate:\n%s", cairntest.Tail(out, 30))
		}
	})
	agent.Crashed()
}

// seedExpiringCertificate puts in the node's certificate store a client
// certificate for it from the cluster CA in caDir, valid from ten minutes
// ago until validFor from now, and returns its end.
func seedExpiringCertificate(t *testing.T, caDir, nodeDir, node string, validFor time.Duration) time.Time {
	t.Helper()
	ca, err := pki.LoadCA(caDir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	certPEM, err := ca.SignRequest(tmpl, &key.PublicKey, 10*time.Minute, validFor)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	store, err := join.KubeletCertStore(nodeDir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Update(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf.NotAfter
}

func readyz(ctx context.Context, rc *rest.Config) error {
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	_, err = c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

func nodeReady(ctx context.Context, client kubernetes.Interface, name string) error {
	n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s Ready=%s (%s)", name, c.Status, c.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition", name)
}

func condition(c certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == typ && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// waitFor polls f every 200 ms until it returns nil, or fails t with its
// last error after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testCSR is a CSR for a kubelet client certificate of node "anon".
func testCSR(t *testing.T, name string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    csrtest.Request(t, pkix.Name{CommonName: "system:node:anon", Organization: []string{"system:nodes"}}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		}}
}

func names(ents []os.DirEntry) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
