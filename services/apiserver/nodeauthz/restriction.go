package nodeauthz

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/services/apiserver"
)

// Restriction is kube's NodeRestriction admission plugin
// (plugin/pkg/admission/noderestriction), rule for rule and with its
// messages. For a user system:node:<name> in system:nodes:
//
//   - nodes: only its own Node; on create no configSource and no labels
//     outside what a kubelet may set (IsKubeletLabel; never under
//     node-restriction.kubernetes.io); on update no new configSource, no
//     change of its taints and no change of such labels;
//   - pods: create only mirror pods bound to itself, owned by its Node (by
//     UID) and referencing no ServiceAccount, Secret, ConfigMap,
//     ClusterTrustBundle or claim; delete, evict and update the status of
//     only pods bound to it, the status without touching labels or
//     resource claim statuses; no other subresource;
//   - persistentvolumeclaims: only status.capacity, status.conditions and
//     the allocated resources of the status;
//   - serviceaccounts/token: only tokens bound to a pod (with its UID)
//     bound to itself;
//   - leases: only in kube-node-lease, of its own name;
//   - csinodes: only its own.
//
// Other users pass.
type Restriction struct {
	Graph *Graph
	// NodeUID is the UID of a Node, for the owner of a mirror pod; a
	// missing Node is a NotFound API error.
	NodeUID func(ctx context.Context, name string) (types.UID, error)
}

var _ apiserver.AdmissionPlugin = (*Restriction)(nil)

// Name implements apiserver.AdmissionPlugin.
func (*Restriction) Name() string { return "NodeRestriction" }

const mirrorPodKey = corev1.MirrorPodAnnotationKey

// Admit implements apiserver.AdmissionPlugin.
func (r *Restriction) Admit(ctx context.Context, a *apiserver.AdmissionRequest) error {
	node, ok := NodeName(a.User)
	if !ok {
		return nil
	}
	if node == "" {
		return forbidden(a, "could not determine node from user %q", a.User.User)
	}
	switch a.Resource.GroupVersion.Group + "/" + a.Resource.Plural {
	case "/pods":
		switch a.Subresource {
		case "":
			return r.admitPod(ctx, node, a)
		case "status":
			return admitPodStatus(node, a)
		case "eviction":
			return r.admitPodEviction(ctx, node, a)
		default:
			return forbidden(a, "unexpected pod subresource %q, only 'status' and 'eviction' are allowed", a.Subresource)
		}
	case "/nodes":
		return admitNode(node, a)
	case "/persistentvolumeclaims":
		if a.Subresource != "status" {
			return forbidden(a, "may only update PVC status")
		}
		return admitPVCStatus(node, a)
	case "/serviceaccounts":
		if a.Operation != "CREATE" || a.Subresource != "token" {
			return nil
		}
		tr, ok := a.Object.(*authenticationv1.TokenRequest)
		if !ok {
			return forbidden(a, "unexpected type %T", a.Object)
		}
		return AdmitTokenRequest(ctx, r.Graph, a.User, a.Namespace, tr)
	case "coordination.k8s.io/leases":
		return admitLease(node, a)
	case "storage.k8s.io/csinodes":
		if name := nameOf(a); name != node {
			return forbidden(a, "can only access CSINode with the same name as the requesting node")
		}
	}
	return nil
}

// forbidden is kube's admission.NewForbidden: 403 for the resource and the
// name of the request (the object's on create).
func forbidden(a *apiserver.AdmissionRequest, format string, args ...any) error {
	return apierrors.NewForbidden(a.Resource.GroupResource(), nameOf(a), fmt.Errorf(format, args...))
}

func nameOf(a *apiserver.AdmissionRequest) string {
	if a.Name == "" && a.Object != nil {
		if n := a.Object.GetName(); n != "" {
			return n
		}
		return a.Object.GetGenerateName()
	}
	return a.Name
}

func (r *Restriction) admitPod(ctx context.Context, node string, a *apiserver.AdmissionRequest) error {
	switch a.Operation {
	case "CREATE":
		return r.admitPodCreate(ctx, node, a)
	case "DELETE":
		on, err := r.podNode(ctx, a)
		if err != nil {
			return err
		}
		if on != node {
			return forbidden(a, "node %q can only delete pods with spec.nodeName set to itself", node)
		}
		return nil
	default:
		return forbidden(a, "unexpected operation %q, node %q can only create and delete mirror pods", a.Operation, node)
	}
}

// podNode is the node of the existing pod of the request.
func (r *Restriction) podNode(ctx context.Context, a *apiserver.AdmissionRequest) (string, error) {
	if old, ok := a.OldObject.(*corev1.Pod); ok {
		return old.Spec.NodeName, nil
	}
	p, err := r.Graph.pods.Get(ctx, a.Namespace, a.Name)
	if apierrors.IsNotFound(err) {
		return "", err
	}
	if err != nil {
		return "", apierrors.NewForbidden(a.Resource.GroupResource(), nameOf(a), err)
	}
	return p.node, nil
}

func (r *Restriction) admitPodCreate(ctx context.Context, node string, a *apiserver.AdmissionRequest) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return forbidden(a, "unexpected type %T", a.Object)
	}
	if _, mirror := pod.Annotations[mirrorPodKey]; !mirror {
		return forbidden(a, "pod does not have %q annotation, node %q can only create mirror pods", mirrorPodKey, node)
	}
	if pod.Spec.NodeName != node {
		return forbidden(a, "node %q can only create pods with spec.nodeName set to itself", node)
	}
	switch refs := pod.OwnerReferences; {
	case len(refs) > 1:
		return forbidden(a, "node %q can only create pods with a single owner reference set to itself", node)
	case len(refs) == 0:
		return forbidden(a, "node %q can only create pods with an owner reference set to itself", node)
	default:
		owner := refs[0]
		if owner.APIVersion != "v1" || owner.Kind != "Node" || owner.Name != node {
			return forbidden(a, "node %q can only create pods with an owner reference set to itself", node)
		}
		if owner.Controller == nil || !*owner.Controller {
			return forbidden(a, "node %q can only create pods with a controller owner reference set to itself", node)
		}
		if owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion {
			return forbidden(a, "node %q must not set blockOwnerDeletion on an owner reference", node)
		}
		uid, err := r.NodeUID(ctx, node)
		if apierrors.IsNotFound(err) {
			return err
		}
		if err != nil {
			return forbidden(a, "error looking up node %s to verify uid: %v", node, err)
		}
		if owner.UID != uid {
			return forbidden(a, "node %s UID mismatch: expected %s got %s", node, owner.UID, uid)
		}
	}
	if pod.Spec.ServiceAccountName != "" {
		return forbidden(a, "node %q can not create pods that reference a service account", node)
	}
	var secrets, configMaps bool
	visitSecrets(pod, func(string) { secrets = true })
	if secrets {
		return forbidden(a, "node %q can not create pods that reference secrets", node)
	}
	visitConfigMaps(pod, func(string) { configMaps = true })
	if configMaps {
		return forbidden(a, "node %q can not create pods that reference configmaps", node)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ClusterTrustBundle != nil }) {
			return forbidden(a, "node %q can not create pods that reference clustertrustbundles", node)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return forbidden(a, "node %q can not create pods that reference persistentvolumeclaims", node)
		}
	}
	return nil
}

func admitPodStatus(node string, a *apiserver.AdmissionRequest) error {
	if a.Operation != "UPDATE" {
		return forbidden(a, "unexpected operation %q", a.Operation)
	}
	old, ok := a.OldObject.(*corev1.Pod)
	if !ok {
		return forbidden(a, "unexpected type %T", a.OldObject)
	}
	if old.Spec.NodeName != node {
		return forbidden(a, "node %q can only update pod status for pods with spec.nodeName set to itself", node)
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return forbidden(a, "unexpected type %T", a.Object)
	}
	if !maps.Equal(old.Labels, pod.Labels) {
		return forbidden(a, "node %q cannot update labels through pod status", node)
	}
	if !claimStatusesEqual(old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses) {
		return forbidden(a, "node %q cannot update resource claim statues", node)
	}
	return nil
}

// claimStatusesEqual compares the claim names of the entries, in order.
func claimStatusesEqual(a, b []corev1.PodResourceClaimStatus) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.PodResourceClaimStatus) bool {
		if x.Name != y.Name || (x.ResourceClaimName == nil) != (y.ResourceClaimName == nil) {
			return false
		}
		return x.ResourceClaimName == nil || *x.ResourceClaimName == *y.ResourceClaimName
	})
}

func (r *Restriction) admitPodEviction(ctx context.Context, node string, a *apiserver.AdmissionRequest) error {
	if a.Operation != "CREATE" {
		return forbidden(a, "unexpected operation %s", a.Operation)
	}
	ev, ok := a.Object.(*policyv1.Eviction)
	if !ok {
		return forbidden(a, "unexpected type %T", a.Object)
	}
	name := a.Name
	if name == "" {
		if ev.Name == "" {
			return forbidden(a, "could not determine pod from request data")
		}
		name = ev.Name
	}
	p, err := r.Graph.pods.Get(ctx, a.Namespace, name)
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return apierrors.NewForbidden(a.Resource.GroupResource(), nameOf(a), err)
	}
	if p.node != node {
		return forbidden(a, "node %s can only evict pods with spec.nodeName set to itself", node)
	}
	return nil
}

func admitPVCStatus(node string, a *apiserver.AdmissionRequest) error {
	if a.Operation != "UPDATE" {
		return forbidden(a, "unexpected operation %q", a.Operation)
	}
	old, ok := a.OldObject.(*corev1.PersistentVolumeClaim)
	if !ok {
		return forbidden(a, "unexpected type %T", a.OldObject)
	}
	cur, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok {
		return forbidden(a, "unexpected type %T", a.Object)
	}
	strip := func(p *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
		p = p.DeepCopy()
		p.ResourceVersion = ""
		p.Status.Capacity, p.Status.Conditions = nil, nil
		// RecoverVolumeExpansionFailure is on (GA).
		p.Status.AllocatedResourceStatuses, p.Status.AllocatedResources = nil, nil
		p.ManagedFields = nil
		return p
	}
	if o, c := strip(old), strip(cur); !apiequality.Semantic.DeepEqual(o, c) {
		return forbidden(a, "node %q is not allowed to update fields other than status.capacity and status.conditions: %v", node, pvcDiff(o, c))
	}
	return nil
}

// pvcDiff names what differs (kube prints a cmp.Diff of the two claims).
func pvcDiff(o, c *corev1.PersistentVolumeClaim) string {
	var d []string
	if !apiequality.Semantic.DeepEqual(o.ObjectMeta, c.ObjectMeta) {
		d = append(d, "metadata")
	}
	if !apiequality.Semantic.DeepEqual(o.Spec, c.Spec) {
		d = append(d, "spec")
	}
	if !apiequality.Semantic.DeepEqual(o.Status, c.Status) {
		d = append(d, "status")
	}
	return strings.Join(d, ", ")
}

func admitNode(node string, a *apiserver.AdmissionRequest) error {
	if name := nameOf(a); name != node {
		return forbidden(a, "node %q is not allowed to modify node %q", node, name)
	}
	switch a.Operation {
	case "CREATE":
		n, ok := a.Object.(*corev1.Node)
		if !ok {
			return forbidden(a, "unexpected type %T", a.Object)
		}
		if n.Spec.ConfigSource != nil {
			return forbidden(a, "node %q is not allowed to create pods with a non-nil configSource", node)
		}
		if bad := forbiddenLabels(modifiedLabels(n.Labels, nil)); len(bad) > 0 {
			return forbidden(a, "node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", "))
		}
	case "UPDATE":
		n, ok := a.Object.(*corev1.Node)
		if !ok {
			return forbidden(a, "unexpected type %T", a.Object)
		}
		old, ok := a.OldObject.(*corev1.Node)
		if !ok {
			return forbidden(a, "unexpected type %T", a.Object)
		}
		if n.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(n.Spec.ConfigSource, old.Spec.ConfigSource) {
			return forbidden(a, "node %q is not allowed to update configSource to a new non-nil configSource", node)
		}
		if !apiequality.Semantic.DeepEqual(n.Spec.Taints, old.Spec.Taints) {
			return forbidden(a, "node %q is not allowed to modify taints", node)
		}
		if bad := forbiddenLabels(modifiedLabels(n.Labels, old.Labels)); len(bad) > 0 {
			return forbidden(a, "is not allowed to modify labels: %s", strings.Join(bad, ", "))
		}
	}
	return nil
}

// modifiedLabels are the keys added, removed or changed from b to a.
func modifiedLabels(a, b map[string]string) map[string]bool {
	m := map[string]bool{}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			m[k] = true
		}
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || v != w {
			m[k] = true
		}
	}
	return m
}

// forbiddenLabels are those of keys a node may not set itself, sorted:
// any under node-restriction.kubernetes.io, and any other kubernetes.io or
// k8s.io label that is not a kubelet label.
func forbiddenLabels(keys map[string]bool) []string {
	var bad []string
	for k := range keys {
		ns := labelNamespace(k)
		if inDomain(ns, corev1.LabelNamespaceNodeRestriction) ||
			(inDomain(ns, "kubernetes.io") || inDomain(ns, "k8s.io")) && !IsKubeletLabel(k) {
			bad = append(bad, k)
		}
	}
	slices.Sort(bad)
	return bad
}

// kubeletLabels are the labels a kubelet may set on its own Node (kube's
// k8s.io/kubelet/pkg/apis.KubeletLabels).
var kubeletLabels = []string{
	corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
	corev1.LabelInstanceType, corev1.LabelInstanceTypeStable,
	corev1.LabelOSStable, corev1.LabelArchStable,
	"beta.kubernetes.io/os", "beta.kubernetes.io/arch",
}

// IsKubeletLabel reports whether a kubelet may set the label on its own
// Node: one of kubeletLabels, or under [*.]kubelet.kubernetes.io or
// [*.]node.kubernetes.io.
func IsKubeletLabel(key string) bool {
	if slices.Contains(kubeletLabels, key) {
		return true
	}
	ns := labelNamespace(key)
	return inDomain(ns, corev1.LabelNamespaceSuffixKubelet) || inDomain(ns, corev1.LabelNamespaceSuffixNode)
}

// inDomain reports whether ns is domain or a subdomain of it.
func inDomain(ns, domain string) bool { return ns == domain || strings.HasSuffix(ns, "."+domain) }

func labelNamespace(key string) string {
	ns, _, found := strings.Cut(key, "/")
	if !found {
		return ""
	}
	return ns
}

func admitLease(node string, a *apiserver.AdmissionRequest) error {
	if a.Namespace != LeaseNamespace {
		return forbidden(a, "can only access leases in the %q system namespace", LeaseNamespace)
	}
	if a.Operation == "CREATE" {
		if _, ok := a.Object.(*coordinationv1.Lease); !ok {
			return forbidden(a, "unexpected type %T", a.Object)
		}
	}
	if nameOf(a) != node {
		return forbidden(a, "can only access node lease with the same name as the requesting node")
	}
	return nil
}

// AdmitTokenRequest is NodeRestriction's check of a TokenRequest a node
// makes: bound to a pod (apiVersion v1, a name and a UID) that exists with
// that UID and is bound to the node.
func AdmitTokenRequest(ctx context.Context, g *Graph, u apiserver.User, namespace string, tr *authenticationv1.TokenRequest) error {
	node, ok := NodeName(u)
	if !ok {
		return nil
	}
	gr := corev1.Resource("serviceaccounts/token")
	deny := func(err error) error { return apierrors.NewForbidden(gr, tr.Name, err) }
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return deny(errors.New("node requested token not bound to a pod"))
	}
	if ref.UID == "" {
		return deny(errors.New("node requested token with a pod binding without a uid"))
	}
	p, err := g.pods.Get(ctx, namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return deny(err)
	}
	if string(ref.UID) != p.uid {
		return deny(fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	if p.node != node {
		return deny(errors.New("node requested token bound to a pod scheduled on a different node"))
	}
	return nil
}
