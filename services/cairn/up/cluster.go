package up

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/pki"
	"github.com/cairn-dev/cairn/services/pki/jointoken"
)

// Servers that join into one cluster, as k3s servers with embedded etcd:
//
//	cairn up --cluster-init                        the first server
//	cairn up --join https://ADDR:PORT --join-token TOKEN   every other
//
// The first writes <data-dir>/join-token: a server token, in the format
// of node join tokens (package jointoken: K10<CA hash>::<id>.<secret>)
// whose bootstrap token carries the extra group
// jointoken.GroupServers, which may read the PKI hand-over
// (controlplane.ServerJoinPath). Such a token joins nodes too; tokens of
// `cairn token create` (group jointoken.GroupNodes) join nodes only.
//
// A joiner fetches the CA from the server's /cacerts and checks it
// against the token's hash before it trusts the server, then reads the
// hand-over with the token over TLS verified with that CA. Both happen
// before anything is written (FetchJoin): a wrong token or another
// cluster's server leaves no data directory and no etcd member behind.
// Then it writes the shared PKI and the token into its data directory and
// its control plane joins etcd and NATS (controlplane.Cluster).
//
// Each server's etcd and NATS listen on the host of its --listen, on the
// ports of ClusterPorts; the addresses are kept in <data-dir>/cluster.json,
// so a restart on the data directory is a member of the cluster again
// without --join or a token.

// ClusterPorts are the ports a clustered server's etcd and NATS listen on.
type ClusterPorts struct {
	EtcdClient, EtcdPeer, NATS, NATSCluster int
}

// DefaultClusterPorts are etcd's and NATS' usual ports.
var DefaultClusterPorts = ClusterPorts{EtcdClient: 2379, EtcdPeer: 2380, NATS: 4222, NATSCluster: 6222}

// ClusterFile is the file in a data directory that makes it a clustered
// server's and keeps its addresses (clusterAddrs).
const ClusterFile = "cluster.json"

// clusterAddrs are a clustered server's listen addresses.
type clusterAddrs struct {
	EtcdClient  string `json:"etcdClient"`
	EtcdPeer    string `json:"etcdPeer"`
	NATS        string `json:"nats"`
	NATSCluster string `json:"natsCluster"`
}

// Clustered reports whether the data directory dir is a clustered
// server's (it holds ClusterFile).
func Clustered(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ClusterFile))
	return err == nil
}

// Join is what a server joining a cluster fetched (FetchJoin).
type Join struct {
	Server string
	Token  jointoken.Token
	Doc    *controlplane.ServerJoin
}

// FetchJoin checks the server at url against the token and reads its
// PKI hand-over, writing nothing. Its errors are one line.
func FetchJoin(ctx context.Context, url, token string) (*Join, error) {
	tok, err := jointoken.Parse(token)
	if err != nil {
		return nil, err
	}
	url = strings.TrimRight(url, "/")
	if !strings.HasPrefix(url, "https://") {
		return nil, fmt.Errorf("join: --join %q: want https://ADDR:PORT", url)
	}
	caPEM, err := jointoken.FetchCA(ctx, url+controlplane.CACertsPath, tok)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 30 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+controlplane.ServerJoinPath, nil)
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.Bootstrap())
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return nil, errors.New("join: the server refused the join token (401 Unauthorized): wrong, expired or deleted")
	case http.StatusForbidden:
		return nil, errors.New("join: the join token may not join servers (403 Forbidden): use the token in the first server's <data-dir>/join-token")
	default:
		return nil, fmt.Errorf("join: %s%s: status %d", url, controlplane.ServerJoinPath, resp.StatusCode)
	}
	var doc controlplane.ServerJoin
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("join: the server's hand-over: %w", err)
	}
	if string(doc.Files[pki.CACertFile]) != string(caPEM) || len(doc.Files[pki.CAKeyFile]) == 0 {
		return nil, errors.New("join: the server's hand-over holds no CA or another one than /cacerts")
	}
	if len(doc.Servers) == 0 {
		return nil, errors.New("join: the server records no servers (is it a cairn up --cluster-init server?)")
	}
	return &Join{Server: url, Token: tok, Doc: &doc}, nil
}

// writeJoin writes what a joining server keeps: the shared PKI files and
// the token.
func writeJoin(paths Paths, j *Join) error {
	if err := os.MkdirAll(paths.PKI, 0o700); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	for name, b := range j.Doc.Files {
		if name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			return fmt.Errorf("up: join: the hand-over names the file %q", name)
		}
		mode := os.FileMode(0o600)
		if strings.HasSuffix(name, ".crt") || strings.HasSuffix(name, ".pub") {
			mode = 0o644
		}
		if err := os.WriteFile(filepath.Join(paths.PKI, name), b, mode); err != nil {
			return fmt.Errorf("up: join: %w", err)
		}
	}
	return jointoken.Write(paths.Root, j.Token)
}

// clusterConfig returns the control plane's cluster configuration, nil
// for a server that is not clustered. It writes ClusterFile on the first
// clustered start and reads it on later ones.
func clusterConfig(cfg Config, paths Paths, id string) (*controlplane.Cluster, error) {
	file := filepath.Join(paths.Root, ClusterFile)
	var addrs clusterAddrs
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &addrs); err != nil {
			return nil, fmt.Errorf("up: %s: %w", file, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("up: %w", err)
	case !cfg.ClusterInit && cfg.Join == nil:
		return nil, nil
	default:
		if _, err := os.Stat(filepath.Join(paths.Etcd, "member")); err == nil {
			return nil, fmt.Errorf("up: %s holds the etcd of a server that is not clustered: --cluster-init and --join need a new data directory", paths.Root)
		}
		host, err := clusterHost(cfg)
		if err != nil {
			return nil, err
		}
		p := cfg.ClusterPorts
		addr := func(port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
		addrs = clusterAddrs{EtcdClient: addr(p.EtcdClient), EtcdPeer: addr(p.EtcdPeer), NATS: addr(p.NATS), NATSCluster: addr(p.NATSCluster)}
		b, err := json.MarshalIndent(addrs, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(file, b, 0o600); err != nil {
			return nil, fmt.Errorf("up: %w", err)
		}
	}
	c := &controlplane.Cluster{Name: id, EtcdClientAddr: addrs.EtcdClient, EtcdPeerAddr: addrs.EtcdPeer,
		NATSAddr: addrs.NATS, NATSClusterAddr: addrs.NATSCluster, PKIDir: paths.PKI}
	if cfg.Join != nil {
		c.Join = &controlplane.ClusterJoin{Servers: cfg.Join.Doc.Servers}
	}
	return c, nil
}

// clusterHost is the host a clustered server's etcd and NATS listen on
// and are reached at: the host of --listen, or --advertise-address for a
// wildcard --listen.
func clusterHost(cfg Config) (string, error) {
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return "", fmt.Errorf("up: listen address %q: %w", cfg.Listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if cfg.AdvertiseAddress == "" {
			return "", errors.New("up: --cluster-init and --join need --listen with the host other servers reach, or --advertise-address")
		}
		host = cfg.AdvertiseAddress
	}
	return host, nil
}

// ensureServerToken makes the first server's join token: the file
// <data-dir>/join-token (kept across restarts) and its bootstrap token
// Secret (created if missing), through the admin kubeconfig.
func ensureServerToken(ctx context.Context, paths Paths, ca []byte) (jointoken.Token, error) {
	tok, err := jointoken.Read(paths.Root)
	if errors.Is(err, os.ErrNotExist) {
		block, _ := pem.Decode(ca)
		if block == nil {
			return jointoken.Token{}, errors.New("up: server token: the CA is no PEM certificate")
		}
		cert, perr := x509.ParseCertificate(block.Bytes)
		if perr != nil {
			return jointoken.Token{}, fmt.Errorf("up: server token: %w", perr)
		}
		if tok, err = jointoken.New(cert); err != nil {
			return jointoken.Token{}, err
		}
		if err := jointoken.Write(paths.Root, tok); err != nil {
			return jointoken.Token{}, err
		}
	} else if err != nil {
		return jointoken.Token{}, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", paths.Kubeconfig)
	if err != nil {
		return jointoken.Token{}, fmt.Errorf("up: server token: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return jointoken.Token{}, fmt.Errorf("up: server token: %w", err)
	}
	secret := tok.BootstrapSecret("cairn up --cluster-init: joins servers and nodes", 0, jointoken.GroupServers)
	if _, err := client.CoreV1().Secrets(jointoken.Namespace).Get(ctx, secret.Name, metav1.GetOptions{}); err == nil {
		return tok, nil
	}
	if _, err := client.CoreV1().Secrets(jointoken.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return jointoken.Token{}, fmt.Errorf("up: server token: %w", err)
	}
	return tok, nil
}
