package join

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
)

// Client certificate rotation of a joined kubelet, as kube's kubelet does
// with rotateCertificates (its default since kubeadm made it one):
//
//   - The certificate and key live in the node's pki/ directory in
//     client-go's file store, kube's layout: kubelet-client-<time>.pem,
//     and kubelet-client-current.pem linking the one in use. The node's
//     kubeconfig names that link, so a restart and other tools find the
//     current certificate.
//   - client-go's certificate manager (the kubelet's own) requests a new
//     certificate through a CSR with the current one when 70 to 90% of
//     its lifetime has passed; the controller-manager approves it as
//     "selfnodeclient" and signs it.
//   - Every connection presents the manager's current certificate; when
//     it changes the open ones are closed (watches included), so none
//     outlives the certificate it was made with: kube's UpdateTransport.

// KubeletCertPrefix is the file store's name for a kubelet's client
// certificates, and CertDir the directory under a node's directory.
const (
	KubeletCertPrefix = "kubelet-client"
	CertDir           = "pki"
)

// KubeletCertStore is the file store of the kubelet client certificates
// of the node whose directory is dir.
func KubeletCertStore(dir string) (certificate.FileStore, error) {
	d := filepath.Join(dir, CertDir)
	s, err := certificate.NewFileStore(KubeletCertPrefix, d, d, "", "")
	if err != nil {
		return nil, fmt.Errorf("join: certificate store %s: %w", d, err)
	}
	return s, nil
}

// Rotation keeps a joined kubelet's client certificate current.
type Rotation struct {
	mgr    certificate.Manager
	dialer *connrotation.Dialer
	log    *slog.Logger
}

// RotateClientCertificate returns rc (the node's config from its
// kubeconfig) made to present the certificate of the node's store, and
// starts renewing that certificate; ctx ends both. The renewals go
// through wrap(config) (the node's failover between servers; nil for
// none). A store still empty
// (a node joined before the store existed) is filled from rc's
// certificate.
func RotateClientCertificate(ctx context.Context, dir, node string, rc *rest.Config, wrap func(*rest.Config) *rest.Config, log *slog.Logger) (*rest.Config, *Rotation, error) {
	if wrap == nil {
		wrap = func(c *rest.Config) *rest.Config { return c }
	}
	store, err := KubeletCertStore(dir)
	if err != nil {
		return nil, nil, err
	}
	if _, err := store.Current(); err != nil {
		var none *certificate.NoCertKeyError
		if !errors.As(err, &none) {
			return nil, nil, fmt.Errorf("join: %w", err)
		}
		certPEM, keyPEM, err := certAndKey(rc)
		if err != nil {
			return nil, nil, err
		}
		if _, err := store.Update(certPEM, keyPEM); err != nil {
			return nil, nil, fmt.Errorf("join: certificate store: %w", err)
		}
	}
	tlsConfig, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("join: %w", err)
	}
	r := &Rotation{log: log, dialer: connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)}
	out := rest.AnonymousClientConfig(rc)
	out.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         r.dialer.DialContext,
	})
	// A custom transport carries the TLS settings itself.
	out.TLSClientConfig = rest.TLSClientConfig{}
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := r.mgr.Current(); c != nil {
			return c, nil
		}
		// No certificate: the server answers 401, as kube's kubelet
		// gets before its first certificate.
		return &tls.Certificate{}, nil
	}
	r.mgr, err = certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return kubernetes.NewForConfig(wrap(out)) },
		Template: &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		},
		SignerName:       certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:        certificate.DefaultKubeletClientGetUsages,
		CertificateStore: store,
		Name:             KubeletCertPrefix,
		Ctx:              &ctx,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("join: certificate manager: %w", err)
	}
	r.mgr.Start()
	go r.closeOnChange(ctx)
	return out, r, nil
}

// Current is the certificate presented now.
func (r *Rotation) Current() *tls.Certificate { return r.mgr.Current() }

// closeOnChange closes every connection when the certificate changes, so
// that new ones (and the watches they carry) present the new one.
func (r *Rotation) closeOnChange(ctx context.Context) {
	defer r.mgr.Stop()
	last := r.mgr.Current()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c := r.mgr.Current()
		if c == nil || c == last {
			continue
		}
		if last != nil && c.Leaf != nil && last.Leaf != nil && c.Leaf.SerialNumber.Cmp(last.Leaf.SerialNumber) == 0 {
			last = c
			continue
		}
		r.log.Info("client certificate rotated; closing connections to use it", "notAfter", notAfter(c))
		last = c
		r.dialer.CloseAll()
	}
}

func notAfter(c *tls.Certificate) time.Time {
	if c.Leaf != nil {
		return c.Leaf.NotAfter
	}
	return time.Time{}
}

// certAndKey reads rc's client certificate and key, from data or files.
func certAndKey(rc *rest.Config) ([]byte, []byte, error) {
	c := rest.CopyConfig(rc)
	if err := rest.LoadTLSFiles(c); err != nil {
		return nil, nil, fmt.Errorf("join: %w", err)
	}
	if len(c.CertData) == 0 || len(c.KeyData) == 0 {
		return nil, nil, errors.New("join: the node's kubeconfig has no client certificate")
	}
	return c.CertData, c.KeyData, nil
}
