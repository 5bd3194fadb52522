package nodeauthz

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cairn-dev/cairn/services/apiserver"
)

// Restriction is kube's NodeRestriction admission plugin
// (plugin/pkg/admission/noderestriction) for what cairn serves: a node may
// create and modify only its own Node, create only mirror pods bound to
// itself, delete, evict and update the status of only the pods bound to
// it, modify only its own CSINode, and request tokens only bound to its
// own pods. Other users pass.
type Restriction struct {
	Graph *Graph
}

var _ apiserver.AdmissionPlugin = (*Restriction)(nil)

// Name implements apiserver.AdmissionPlugin.
func (*Restriction) Name() string { return "NodeRestriction" }

const mirrorPodKey = "kubernetes.io/config.mirror"

// Admit implements apiserver.AdmissionPlugin.
func (r *Restriction) Admit(_ context.Context, a *apiserver.AdmissionRequest) error {
	node, ok := NodeName(a.User)
	if !ok {
		return nil
	}
	forbid := func(format string, args ...any) error {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, fmt.Errorf(format, args...))
	}
	if a.Resource.GroupVersion.Group == "coordination.k8s.io" && a.Resource.Plural == "leases" {
		if a.Operation == "CREATE" && a.Object != nil && a.Object.GetName() != node {
			return forbid("can only access node lease with the same name as the requesting node")
		}
		return nil
	}
	if a.Resource.GroupVersion.Group == "storage.k8s.io" && a.Resource.Plural == "csinodes" {
		// kube's admitCSINode: a node's own CSINode only.
		if a.Name != node && (a.Object == nil || a.Object.GetName() != node) {
			return forbid("node %q is not allowed to modify CSINode %q", node, a.Name)
		}
		return nil
	}
	if a.Resource.GroupVersion.Group != "" {
		return nil
	}
	switch a.Resource.Plural {
	case "serviceaccounts":
		if tr, ok := a.Object.(*authenticationv1.TokenRequest); ok && a.Subresource == "token" {
			return AdmitTokenRequest(r.Graph, a.User, a.Namespace, tr)
		}
	case "nodes":
		if a.Operation != "DELETE" && a.Name != node && (a.Object == nil || a.Object.GetName() != node) {
			return forbid("node %q is not allowed to modify node %q", node, a.Name)
		}
	case "pods":
		switch {
		case a.Subresource == "" && a.Operation == "CREATE":
			pod, _ := a.Object.(*corev1.Pod)
			if pod == nil {
				return nil
			}
			if _, mirror := pod.Annotations[mirrorPodKey]; !mirror {
				return forbid("pod does not have %q annotation, node %q can only create mirror pods", mirrorPodKey, node)
			}
			if pod.Spec.NodeName != node {
				return forbid("node %q can only create pods with spec.nodeName set to itself", node)
			}
		case a.Subresource == "" && a.Operation == "DELETE":
			if old, _ := a.OldObject.(*corev1.Pod); old != nil {
				if old.Spec.NodeName != node {
					return forbid("node %q can only delete pods with spec.nodeName set to itself", node)
				}
			} else if _, on := r.Graph.podOn(node, a.Namespace, a.Name); !on {
				return forbid("node %q can only delete pods with spec.nodeName set to itself", node)
			}
		case a.Subresource == "status":
			if old, _ := a.OldObject.(*corev1.Pod); old != nil {
				if old.Spec.NodeName != node {
					return forbid("node %q can only update pod status for pods with spec.nodeName set to itself", node)
				}
			} else if _, on := r.Graph.podOn(node, a.Namespace, a.Name); !on {
				return forbid("node %q can only update pod status for pods with spec.nodeName set to itself", node)
			}
		case a.Subresource == "eviction":
			if _, on := r.Graph.podOn(node, a.Namespace, a.Name); !on {
				return forbid("node %q can only evict pods with spec.nodeName set to itself", node)
			}
		}
	}
	return nil
}

// AdmitTokenRequest is NodeRestriction's check of a TokenRequest a node
// makes: bound to a pod that is bound to the node, with that pod's UID.
func AdmitTokenRequest(g *Graph, u apiserver.User, namespace string, tr *authenticationv1.TokenRequest) error {
	node, ok := NodeName(u)
	if !ok {
		return nil
	}
	gr := corev1.Resource("serviceaccounts/token")
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.Kind != "Pod" {
		return apierrors.NewForbidden(gr, tr.Name, fmt.Errorf("node requested token not bound to a pod"))
	}
	uid, on := g.podOn(node, namespace, ref.Name)
	if !on {
		return apierrors.NewForbidden(gr, tr.Name, fmt.Errorf("node requested token bound to a pod scheduled on a different node"))
	}
	if ref.UID != "" && string(ref.UID) != uid {
		return apierrors.NewForbidden(gr, tr.Name, fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return nil
}
