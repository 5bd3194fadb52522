package join

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/kubeconfig"
	"github.com/cairn-dev/cairn/services/cairn/up"
	"github.com/cairn-dev/cairn/services/embedded/endpoints"
	"github.com/cairn-dev/cairn/services/pki"
)

// KubeconfigFile is the name of a node's kubeconfig in its directory.
const KubeconfigFile = "kubelet.kubeconfig"

// NodeDir is the directory of node's state in the data directory dataDir.
func NodeDir(dataDir, node string) string { return filepath.Join(dataDir, "nodes", node) }

// KubeconfigPath is where NodeKubeconfig keeps node's kubeconfig.
func KubeconfigPath(dataDir, node string) string {
	return filepath.Join(NodeDir(dataDir, node), KubeconfigFile)
}

// HollowKubeconfigFile is the name of a hollow kubelet's kubeconfig in
// its directory.
const HollowKubeconfigFile = "hollow.kubeconfig"

// HollowKubeconfig is NodeKubeconfig for a hollow kubelet (cairn kubelet
// --runtime hollow, whose simulated nodes are name-0, name-1, ...): user
// cairn:hollow-kubelet:<name> in group cairn:hollow-nodes, which the
// bootstrap policy binds to the ClusterRole system:node. A node's own
// identity would let it write only the Node of its name (NodeRestriction).
func HollowKubeconfig(dataDir, name string) (path string, issued bool, err error) {
	if name == "" {
		return "", false, errors.New("join: empty node name")
	}
	return issueKubeconfig(dataDir, filepath.Join(NodeDir(dataDir, name), HollowKubeconfigFile),
		apiserver.HollowKubeletUserPrefix+name, []string{apiserver.GroupHollowNodes})
}

// ProxyKubeconfigFile is the name of a node's proxy kubeconfig in its
// directory.
const ProxyKubeconfigFile = "proxy.kubeconfig"

// NodeKubeconfig returns the path of node's kubeconfig in dataDir, the
// data directory of a running `cairn up`. When the file does not exist yet
// it issues the node's client certificate from the directory's PKI and
// writes the file (mode 0600); issued reports whether it did. It fails when
// dataDir holds no PKI or no running cluster's endpoints file.
func NodeKubeconfig(dataDir, node string) (path string, issued bool, err error) {
	if node == "" {
		return "", false, errors.New("join: empty node name")
	}
	return issueKubeconfig(dataDir, KubeconfigPath(dataDir, node), apiserver.NodeUserPrefix+node, []string{apiserver.GroupNodes})
}

// ProxyKubeconfig is NodeKubeconfig for the node's proxy: user
// system:kube-proxy (bound to the ClusterRole system:node-proxier), in
// the node's directory as ProxyKubeconfigFile.
func ProxyKubeconfig(dataDir, node string) (path string, issued bool, err error) {
	if node == "" {
		return "", false, errors.New("join: empty node name")
	}
	return issueKubeconfig(dataDir, filepath.Join(NodeDir(dataDir, node), ProxyKubeconfigFile), apiserver.UserKubeProxy, nil)
}

func issueKubeconfig(dataDir, path, user string, groups []string) (string, bool, error) {
	if _, err := os.Stat(path); err == nil {
		return path, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("join: %w", err)
	}
	paths, err := up.PathsOf(dataDir)
	if err != nil {
		return "", false, err
	}
	ep, err := endpoints.Read(endpoints.Path(paths.Root))
	if err != nil {
		return "", false, fmt.Errorf("join: no running cairn up in %s to join: %w", dataDir, err)
	}
	ca, err := pki.LoadCA(paths.PKI)
	if err != nil {
		return "", false, fmt.Errorf("join: no cluster CA in %s to issue the node's certificate: %w", paths.PKI, err)
	}
	cert, key, err := ca.IssueClient(user, groups)
	if err != nil {
		return "", false, fmt.Errorf("join: %w", err)
	}
	if err := kubeconfig.Write(path, ep.APIServer, ca.CAPEM, cert, key, user); err != nil {
		return "", false, fmt.Errorf("join: %w", err)
	}
	return path, true, nil
}
