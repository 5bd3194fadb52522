package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/cairn-dev/cairn/schemas/codec"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/nodeauthz"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// nodeAuthz is the Node authorizer and NodeRestriction of a control plane
// (Config.NodeAuthorizer); nil when off.
type nodeAuthz struct {
	graph *nodeauthz.Graph
	store *storage.Store
}

func (cp *ControlPlane) newNodeAuthz(cfg Config) *nodeAuthz {
	if !cfg.NodeAuthorizer {
		return nil
	}
	return &nodeAuthz{graph: nodeauthz.NewGraph(cp.Store, cp.Hub, cfg.Log.With("component", "node-authorizer")), store: cp.Store}
}

// authorizer is Node before next (RBAC), or next alone when off.
func (n *nodeAuthz) authorizer(next apiserver.Authorizer) apiserver.Authorizer {
	if n == nil {
		return next
	}
	return nodeauthz.Union{&nodeauthz.Authorizer{Graph: n.graph}, next}
}

func (n *nodeAuthz) plugins() []apiserver.AdmissionPlugin {
	if n == nil {
		return nil
	}
	return []apiserver.AdmissionPlugin{&nodeauthz.Restriction{Graph: n.graph, NodeUID: n.nodeUID}}
}

// nodeUID reads a Node's UID from etcd: only a node creating a mirror pod
// asks, so no cache of the nodes is kept for it.
func (n *nodeAuthz) nodeUID(ctx context.Context, name string) (types.UID, error) {
	kv, err := n.store.Get(ctx, storage.Key("", "nodes", "", name))
	if errors.Is(err, storage.ErrNotFound) {
		return "", apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}
	if err != nil {
		return "", err
	}
	var node metav1.PartialObjectMetadata
	if err := codec.Unmarshal(kv.Value, &node); err != nil {
		return "", err
	}
	return node.UID, nil
}

// start empties the system:node binding the bootstrap policy binds to
// system:nodes (kube keeps it without subjects once the Node authorizer
// decides for nodes) and runs the graph until it holds its snapshot.
func (n *nodeAuthz) start(ctx context.Context, cp *ControlPlane, az *authz) error {
	if n == nil {
		return nil
	}
	cs, err := kubernetes.NewForConfig(az.lb.config())
	if err != nil {
		return fmt.Errorf("controlplane: loopback client: %w", err)
	}
	crbs := cs.RbacV1().ClusterRoleBindings()
	// Admission refuses writes ("not yet ready to handle request") until
	// its policy informers have synced, which a loaded machine can take
	// longer than their 10 s first wait for: retried, as a conflict is.
	notReady := func(err error) bool {
		return apierrors.IsConflict(err) || (apierrors.IsForbidden(err) && strings.Contains(err.Error(), "not yet ready to handle request"))
	}
	backoff := wait.Backoff{Steps: 60, Duration: 100 * time.Millisecond, Factor: 1.5, Cap: 2 * time.Second}
	if err := retry.OnError(backoff, notReady, func() error {
		b, err := crbs.Get(ctx, "system:node", metav1.GetOptions{})
		if err != nil || len(b.Subjects) == 0 {
			return err
		}
		b.Subjects = nil
		_, err = crbs.Update(ctx, b, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("controlplane: system:node binding: %w", err)
	}
	cp.goRun("node authorizer graph", n.graph.Run)
	select {
	case <-n.graph.Synced():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("controlplane: node authorizer graph: %w", ctx.Err())
	}
}
