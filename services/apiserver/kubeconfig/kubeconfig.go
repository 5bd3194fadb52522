package kubeconfig

import (
	"errors"
	"fmt"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cairn-dev/cairn/services/atomicfile"
)

// ContextName is the name of the context (and of the cluster) in every
// kubeconfig this package writes.
const ContextName = "cairn"

// Write writes a kubeconfig to path (mode 0600, parent directories created)
// for server, e.g. "https://127.0.0.1:6443", trusting caPEM and
// authenticating as user with the client certificate certPEM and its key
// keyPEM. An existing file is replaced, not merged.
func Write(path, server string, caPEM, certPEM, keyPEM []byte, user string) error {
	auth := clientcmdapi.NewAuthInfo()
	auth.ClientCertificateData = certPEM
	auth.ClientKeyData = keyPEM
	return write(path, server, caPEM, user, auth)
}

// WriteCertFile is Write with the client certificate and key read from
// certFile (one PEM file holding both, as client-go's certificate store
// keeps them), so that a client rereads it when it is renewed.
func WriteCertFile(path, server string, caPEM []byte, certFile, user string) error {
	auth := clientcmdapi.NewAuthInfo()
	auth.ClientCertificate = certFile
	auth.ClientKey = certFile
	return write(path, server, caPEM, user, auth)
}

func write(path, server string, caPEM []byte, user string, auth *clientcmdapi.AuthInfo) error {
	if server == "" || user == "" {
		return errors.New("kubeconfig: server and user must be set")
	}
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = server
	cluster.CertificateAuthorityData = caPEM
	cfg.Clusters[ContextName] = cluster
	cfg.AuthInfos[user] = auth

	ctx := clientcmdapi.NewContext()
	ctx.Cluster = ContextName
	ctx.AuthInfo = user
	cfg.Contexts[ContextName] = ctx
	cfg.CurrentContext = ContextName

	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig: %s: %w", path, err)
	}
	// Through a temporary file and a rename: a reader (kubectl, a client
	// of a server restarting and writing its kubeconfig again) sees the old
	// file or the new one, never an empty one.
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("kubeconfig: write %s: %w", path, err)
	}
	return nil
}
