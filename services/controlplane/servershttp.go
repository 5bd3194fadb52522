package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/rbac"
	"github.com/cairn-dev/cairn/services/embedded"
)

// What clustered servers serve about themselves (Config.Cluster):
//
//	GET    /cairn/v1/servers/join  ServerJoin: the PKI hand-over to a
//	                               server that joins, to the server token's
//	                               group (rbac.ServerJoinGroup) and admins;
//	                               over the apiserver's TLS, which the
//	                               joiner verified against its token's CA
//	                               hash
//	GET    /cairn/v1/servers       ServerList: the servers recorded and the
//	                               JetStream meta group (admins)
//	DELETE /cairn/v1/servers/NAME  removes a stopped server (admins): its
//	                               record, its share of the replicas, its
//	                               NATS peer and its etcd member
const (
	ServerJoinPath = rbac.ServerJoinURL
	ServersPath    = "/cairn/v1/servers"
)

// ServerJoin is the document at ServerJoinPath.
type ServerJoin struct {
	// Files are the PKI files a server shares with the others, by name:
	// the CA (ca.crt, ca.key) and the service-account keys (sa.key,
	// sa.pub, retired sa-*.pub).
	Files   map[string][]byte `json:"files"`
	Servers []ServerRecord    `json:"servers"`
}

// ServerList is the document at ServersPath.
type ServerList struct {
	Servers []ServerRecord    `json:"servers"`
	NATS    embedded.NATSMeta `json:"nats"`
}

// sharedPKIFiles are the names (globs) of ServerJoin.Files.
var sharedPKIFiles = []string{"ca.crt", "ca.key", "sa.key", "sa.pub", "sa-*.pub"}

func (cp *ControlPlane) serverHandlers(cfg Config, extra map[string]http.Handler) {
	if cfg.Cluster == nil {
		return
	}
	extra[ServerJoinPath] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "servers"}, r.Method))
			return
		}
		doc, err := cp.serverJoin(r.Context(), cfg.Cluster.PKIDir)
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		writeJSON(w, doc)
	})
	extra[ServersPath] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		servers, err := ListServers(r.Context(), cp.Etcd)
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		meta, err := cp.embNATS.Meta()
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		writeJSON(w, ServerList{Servers: servers, NATS: meta})
	})
	extra[ServersPath+"/"] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, ServersPath+"/")
		if r.Method != http.MethodDelete {
			writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "servers"}, r.Method))
			return
		}
		if name == cfg.Cluster.Name {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("server %s is the one serving this request: remove it through another server", name)))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Minute)
		defer cancel()
		if err := cp.removeServer(ctx, name, cfg); err != nil {
			if errors.Is(err, ErrNoServer) {
				writeError(w, apierrors.NewNotFound(schema.GroupResource{Resource: "servers"}, name))
				return
			}
			if errors.Is(err, ErrNoQuorum) {
				writeError(w, apierrors.NewServiceUnavailable(err.Error()))
				return
			}
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		writeJSON(w, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
			Message: "server " + name + " removed"})
	})
}

func (cp *ControlPlane) serverJoin(ctx context.Context, dir string) (*ServerJoin, error) {
	doc := &ServerJoin{Files: map[string][]byte{}}
	for _, g := range sharedPKIFiles {
		paths, err := filepath.Glob(filepath.Join(dir, g))
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("controlplane: server join: %w", err)
			}
			doc.Files[filepath.Base(p)] = b
		}
	}
	servers, err := ListServers(ctx, cp.Etcd)
	if err != nil {
		return nil, err
	}
	doc.Servers = servers
	return doc, nil
}

// removeServer removes the server name: its record first (so that the
// replicas are not raised again for it), then the streams' replicas are
// lowered to what the remaining servers carry, then its NATS peer and its
// etcd member are removed. Each step tolerates what an earlier, broken-off
// removal already did; a name that none of them knows is ErrNoServer.
func (cp *ControlPlane) removeServer(ctx context.Context, name string, cfg Config) error {
	log := cfg.Log.With("server", name)
	if err := quorum(ctx, cp.Etcd); err != nil {
		return err
	}
	recErr := deleteServer(ctx, cp.Etcd, name)
	if recErr != nil && !errors.Is(recErr, ErrNoServer) {
		return recErr
	}
	servers, err := ListServers(ctx, cp.Etcd)
	if err != nil {
		return err
	}
	if err := ScaleLog(ctx, cp.JS, events.ReplicasFor(len(servers)), log); err != nil {
		return err
	}
	natsErr := cp.embNATS.RemovePeer(ctx, name)
	if natsErr != nil && !errors.Is(natsErr, embedded.ErrNotNATSPeer) {
		return natsErr
	}
	etcdErr := embedded.RemoveEtcdMember(ctx, cp.Etcd, name)
	if etcdErr != nil && !errors.Is(etcdErr, embedded.ErrNoEtcdMember) {
		return etcdErr
	}
	if recErr != nil && natsErr != nil && etcdErr != nil {
		return fmt.Errorf("controlplane: server %s: %w", name, ErrNoServer)
	}
	log.Info("controlplane: server removed", "servers", len(servers))
	return nil
}

// ErrNoQuorum means etcd answers no linearizable read: a majority of its
// members is not reachable from this server, so no member can be removed
// (etcd's member remove is itself a write of the majority).
var ErrNoQuorum = errors.New("etcd has no quorum")

// quorumTimeout bounds the read that tells whether etcd has a quorum; a
// cluster with one answers it in milliseconds, even loaded.
const quorumTimeout = 5 * time.Second

// quorum returns nil if etcd serves a linearizable read within
// quorumTimeout, and otherwise ErrNoQuorum with the members this server
// knows of, so that a removal that cannot happen is refused at once
// instead of each of its writes waiting out the request's timeout.
func quorum(ctx context.Context, cli *clientv3.Client) error {
	qctx, cancel := context.WithTimeout(ctx, quorumTimeout)
	defer cancel()
	_, err := cli.Get(qctx, ServersPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err() // the request ended, not etcd's quorum
	}
	members := "its members unknown"
	mctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if l, merr := cli.MemberList(mctx, clientv3.WithSerializable()); merr == nil {
		members = fmt.Sprintf("%d members", len(l.Members))
	}
	return fmt.Errorf("%w (%s; no linearizable read within %v: %v): a server is removed by a majority of the etcd members; "+
		"start the stopped servers first (in a cluster of two, neither can be removed while the other is down)",
		ErrNoQuorum, members, quorumTimeout, err)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err apierrors.APIStatus) {
	st := err.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	json.NewEncoder(w).Encode(st)
}

// splitPort splits host:port.
func splitPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, port, nil
}
