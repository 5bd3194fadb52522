package join

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"

	"github.com/cairn-dev/cairn/services/apiserver/kubeconfig"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/pki/jointoken"
)

// TLS bootstrapping of a node that joins with a token (cairn kubelet
// --join), as kube's kubelet does with a bootstrap kubeconfig and kubeadm's
// discovery before it:
//
//  1. The server's CA is fetched from its /cacerts (without trusting the
//     server yet) and checked against the token's CA hash: a wrong hash
//     (another cluster, or a server in the middle) stops here, writing
//     nothing.
//  2. With that CA and the token's bootstrap part as bearer token, the
//     node creates a CertificateSigningRequest for CN=system:node:<name>,
//     O=system:nodes (signer kubernetes.io/kube-apiserver-client-kubelet),
//     which the controller-manager approves and signs, and waits for the
//     certificate. Its key never leaves the node's directory.
//  3. The node's proxy gets its credentials the same way, as k3s gives
//     agents the kube-proxy certificate for their token: a CSR for
//     CN=system:kube-proxy to kubernetes.io/kube-apiserver-client, which
//     the approver approves for bootstrappers.
//  4. The kubeconfigs are written in the node's directory; a restart finds
//     them and skips all of this.

// Bootstrap is what a joining node needs.
type Bootstrap struct {
	// Server is the https URL of the server joined.
	Server string
	Token  jointoken.Token
	Node   string
	// Dir is the node's directory (kubelet.kubeconfig, proxy.kubeconfig,
	// the keys and servers.json).
	Dir string
	// Timeout bounds the whole bootstrap; 0 means 5 minutes.
	Timeout time.Duration
}

// Credentials are a joined node's kubeconfigs and the servers it knows.
type Credentials struct {
	Kubeconfig, ProxyKubeconfig string
	// Servers are the apiservers (host:port) and NATS URLs last known.
	Servers Servers
	// Issued is whether this call bootstrapped them (false: found on disk).
	Issued bool
}

// Servers is the file servers.json in a joined node's directory: every
// server it may talk to, refreshed while it runs, so that a restart does
// not depend on the one server it joined through.
type Servers struct {
	APIServers []string `json:"apiservers"`
	NATS       []string `json:"nats"`
}

// ServersFile is the name of Servers in the node's directory.
const ServersFile = "servers.json"

// ReadServers reads dir's servers.json.
func ReadServers(dir string) (Servers, error) {
	var s Servers
	b, err := os.ReadFile(filepath.Join(dir, ServersFile))
	if err != nil {
		return s, fmt.Errorf("join: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("join: %s: %w", ServersFile, err)
	}
	return s, nil
}

// WriteServers writes dir's servers.json atomically.
func WriteServers(dir string, s Servers) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(dir, ServersFile)
	if err := os.WriteFile(p+".tmp", b, 0o600); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	return os.Rename(p+".tmp", p)
}

// ErrRefused is a join the server refused: the token is not (or no
// longer) valid.
var ErrRefused = errors.New("join: the server refused the join token (unknown, wrong or expired)")

// Join returns the node's credentials, bootstrapping them when its
// directory has none (see above). Its errors are one line.
func Join(ctx context.Context, b Bootstrap) (Credentials, error) {
	if b.Node == "" {
		return Credentials{}, errors.New("join: empty node name")
	}
	if b.Timeout <= 0 {
		b.Timeout = 5 * time.Minute
	}
	c := Credentials{Kubeconfig: filepath.Join(b.Dir, KubeconfigFile), ProxyKubeconfig: filepath.Join(b.Dir, ProxyKubeconfigFile)}
	if haveAll(c.Kubeconfig, c.ProxyKubeconfig) {
		s, err := ReadServers(b.Dir)
		if err != nil {
			return c, err
		}
		c.Servers = s
		return c, nil
	}
	u := strings.TrimRight(b.Server, "/")
	if !strings.HasPrefix(u, "https://") {
		return c, fmt.Errorf("join: --join %q: want https://ADDR:PORT", b.Server)
	}
	ctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	caPEM, err := jointoken.FetchCA(ctx, u+controlplane.CACertsPath, b.Token)
	if err != nil {
		return c, err
	}
	boot := &rest.Config{Host: u, BearerToken: b.Token.Bootstrap(), TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
		UserAgent: "cairn-kubelet-bootstrap", Timeout: 30 * time.Second}
	client, err := kubernetes.NewForConfig(boot)
	if err != nil {
		return c, fmt.Errorf("join: %w", err)
	}
	// The token is tried before anything is written: a refused join
	// leaves no directory behind.
	if _, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return c, refused(err)
	}
	if err := os.MkdirAll(b.Dir, 0o700); err != nil {
		return c, fmt.Errorf("join: %w", err)
	}
	// The kubelet's certificate goes to its store, where rotation renews
	// it (see RotateClientCertificate); the proxy's is kept in its
	// kubeconfig.
	node := "system:node:" + b.Node
	certPEM, keyPEM, err := requestCertificate(ctx, client, c.Kubeconfig+".key", pkix.Name{CommonName: node, Organization: []string{"system:nodes"}},
		certificatesv1.KubeAPIServerClientKubeletSignerName)
	if err != nil {
		return c, err
	}
	store, err := KubeletCertStore(b.Dir)
	if err != nil {
		return c, err
	}
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		return c, fmt.Errorf("join: certificate store: %w", err)
	}
	if err := kubeconfig.WriteCertFile(c.Kubeconfig, u, caPEM, store.CurrentPath(), node); err != nil {
		return c, err
	}
	certPEM, keyPEM, err = requestCertificate(ctx, client, c.ProxyKubeconfig+".key", pkix.Name{CommonName: "system:kube-proxy"},
		certificatesv1.KubeAPIServerClientSignerName)
	if err != nil {
		return c, err
	}
	if err := kubeconfig.Write(c.ProxyKubeconfig, u, caPEM, certPEM, keyPEM, "system:kube-proxy"); err != nil {
		return c, err
	}
	c.Issued = true
	c.Servers = Servers{APIServers: []string{strings.TrimPrefix(u, "https://")}}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return c, fmt.Errorf("join: %w", err)
	}
	if nats, err := FetchNATS(ctx, rc); err == nil {
		c.Servers.NATS = nats
	} else {
		return c, err
	}
	return c, WriteServers(b.Dir, c.Servers)
}

func haveAll(paths ...string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// requestCertificate gets a certificate for subject from signer through
// a CSR. The key is kept at keyPath from before the CSR, so a start
// killed while it waited finds its CSR again (the name is a digest of key
// and subject, as the kubelet names its requests).
func requestCertificate(ctx context.Context, client kubernetes.Interface, keyPath string, subject pkix.Name, signer string) (certPEM, keyPEM []byte, err error) {
	keyPEM, err = os.ReadFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("join: key: %w", err)
		}
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, nil, fmt.Errorf("join: key: %w", err)
		}
		keyPEM = pem.EncodeToMemory(&pem.Block{Type: keyutil.ECPrivateKeyBlockType, Bytes: der})
		if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
			return nil, nil, fmt.Errorf("join: %w", err)
		}
	} else if err != nil {
		return nil, nil, fmt.Errorf("join: %w", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("join: %s: %w", keyPath, err)
	}
	ek := key.(*ecdsa.PrivateKey)
	req, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, ek)
	if err != nil {
		return nil, nil, fmt.Errorf("join: csr: %w", err)
	}
	reqPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: req})
	pub, _ := x509.MarshalPKIXPublicKey(&ek.PublicKey)
	sum := sha256.Sum256(append(pub, subject.CommonName...))
	name := "node-csr-" + hex.EncodeToString(sum[:12])
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	reqName, uid, err := csr.RequestCertificateWithContext(ctx, client, reqPEM, name, signer, nil, usages, ek)
	if err != nil {
		return nil, nil, refused(err)
	}
	certPEM, err = csr.WaitForCertificate(ctx, client, reqName, uid)
	if err != nil {
		return nil, nil, fmt.Errorf("join: waiting for the certificate of %s (CSR %s): %w", subject.CommonName, reqName, oneLine(refused(err)))
	}
	return certPEM, keyPEM, nil
}

// refused maps the apiserver's 401 to ErrRefused.
func refused(err error) error {
	if apierrors.IsUnauthorized(err) || strings.Contains(err.Error(), "Unauthorized") {
		return ErrRefused
	}
	return fmt.Errorf("join: %w", oneLine(err))
}

func oneLine(err error) error {
	if s := err.Error(); strings.Contains(s, "\n") {
		return errors.New(strings.Join(strings.Fields(s), " "))
	}
	return err
}

// FetchNATS asks a server (with a node's credentials) for the NATS URLs
// of the log.
func FetchNATS(ctx context.Context, rc *rest.Config) ([]string, error) {
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	raw, err := client.CoreV1().RESTClient().Get().AbsPath(controlplane.EndpointsPath).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("join: the log's NATS URLs: %w", oneLine(err))
	}
	var ep controlplane.JoinEndpoints
	if err := json.Unmarshal(raw, &ep); err != nil {
		return nil, fmt.Errorf("join: the log's NATS URLs: %w", err)
	}
	if len(ep.NATS) == 0 {
		return nil, errors.New("join: the server named no NATS URL")
	}
	return slices.Clone(ep.NATS), nil
}
