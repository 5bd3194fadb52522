package csiprovisioner

import (
	"context"
	"errors"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/csiconn"
	"github.com/cairn-dev/cairn/services/controllers/persistentvolume/binding"
)

// Event reasons external-provisioner writes.
const (
	ReasonProvisioning          = "Provisioning"
	ReasonProvisioningSucceeded = "ProvisioningSucceeded"
	ReasonProvisioningFailed    = "ProvisioningFailed"
	ReasonVolumeFailedDelete    = "VolumeFailedDelete"
)

// VolumeName is the name of the volume provisioned for a claim:
// pvc-<claim UID>, as external-provisioner's default --volume-name-prefix.
func VolumeName(pvc *corev1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

// driverOf is the provisioner the PV controller named on the claim.
func driverOf(pvc *corev1.PersistentVolumeClaim) string {
	if d := pvc.Annotations[binding.AnnStorageProvisioner]; d != "" {
		return d
	}
	return pvc.Annotations[binding.AnnBetaStorageProvisioner]
}

func (c *Controller) reconcileClaim(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	pvc, ok := c.claims.Get(ns, name)
	if !ok || pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
		return consumer.Result{}, nil
	}
	driver := driverOf(pvc)
	if !c.pool.Has(driver) {
		return consumer.Result{}, nil
	}
	sc, ok := c.classes.Get("", binding.ClaimClass(pvc))
	if !ok || sc.Provisioner != driver {
		return consumer.Result{}, nil
	}
	_, selected := pvc.Annotations[binding.AnnSelectedNode]
	if binding.IsDelayBinding(sc) && !selected {
		// Waiting for the scheduler to pick the first consumer's node.
		return consumer.Result{}, nil
	}
	if _, ok := c.volumes.Get("", VolumeName(pvc)); ok {
		return consumer.Result{}, nil
	}
	return consumer.Result{}, c.provision(ctx, pvc, sc)
}

// provision is external-provisioner's Provision: CreateVolume, then the
// PV bound to the claim (the PV controller completes the binding).
func (c *Controller) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) error {
	c.event(ctx, pvc, corev1.EventTypeNormal, ReasonProvisioning,
		fmt.Sprintf("External provisioner is provisioning volume for claim %q", pvc.Namespace+"/"+pvc.Name))
	pv, err := c.createVolume(ctx, pvc, sc)
	if err != nil {
		c.event(ctx, pvc, corev1.EventTypeWarning, ReasonProvisioningFailed,
			fmt.Sprintf("failed to provision volume with StorageClass %q: %v", sc.Name, err))
		if st, ok := status.FromError(err); ok && st.Code() == codes.ResourceExhausted {
			// The chosen node cannot hold it: let the scheduler choose
			// again (external-provisioner's ProvisioningReschedule).
			return c.reschedule(ctx, pvc)
		}
		return err
	}
	if _, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("csiprovisioner: create volume %s: %w", pv.Name, err)
	}
	c.event(ctx, pvc, corev1.EventTypeNormal, ReasonProvisioningSucceeded, "Successfully provisioned volume "+pv.Name)
	return nil
}

// reschedule drops the claim's selected node.
func (c *Controller) reschedule(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if _, ok := pvc.Annotations[binding.AnnSelectedNode]; !ok {
		return nil
	}
	n := pvc.DeepCopy()
	delete(n.Annotations, binding.AnnSelectedNode)
	if _, err := c.client.CoreV1().PersistentVolumeClaims(n.Namespace).Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("csiprovisioner: reschedule %s/%s: %w", n.Namespace, n.Name, err)
	}
	return nil
}

// createVolume calls CreateVolume and builds the PV of its answer.
func (c *Controller) createVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) (*corev1.PersistentVolume, error) {
	conn, err := c.pool.Get(sc.Provisioner)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	caps, err := conn.Capabilities(cctx)
	if err != nil {
		return nil, err
	}
	if !caps.CreateDelete {
		return nil, errors.New("driver does not support dynamic provisioning: plugin CREATE_DELETE_VOLUME capability is not reported")
	}
	req, err := c.createRequest(pvc, sc, caps)
	if err != nil {
		return nil, err
	}
	rep, err := conn.Controller.CreateVolume(cctx, req)
	if err != nil {
		return nil, fmt.Errorf("rpc CreateVolume: %w", err)
	}
	return newPV(pvc, sc, req, rep.GetVolume()), nil
}

func (c *Controller) createRequest(pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, caps csiconn.Capabilities) (*csi.CreateVolumeRequest, error) {
	vcs, err := VolumeCapabilities(pvc.Spec.AccessModes, pvc.Spec.VolumeMode, sc.Parameters[paramFSType], sc.MountOptions, caps.SingleNodeMultiWriter)
	if err != nil {
		return nil, err
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	req := &csi.CreateVolumeRequest{Name: VolumeName(pvc), Parameters: driverParameters(sc), VolumeCapabilities: vcs,
		CapacityRange: &csi.CapacityRange{RequiredBytes: size.Value()}}
	if limit, ok := pvc.Spec.Resources.Limits[corev1.ResourceStorage]; ok {
		req.CapacityRange.LimitBytes = limit.Value()
	}
	if caps.Topology {
		if req.AccessibilityRequirements, err = c.accessibility(pvc, sc); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// accessibility is external-provisioner's
// GenerateAccessibilityRequirements: the selected node's topology when
// the scheduler chose one; else the class's allowedTopologies; else every
// topology of the nodes whose CSINode registers the driver.
func (c *Controller) accessibility(pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) (*csi.TopologyRequirement, error) {
	driver := sc.Provisioner
	if nodeName := pvc.Annotations[binding.AnnSelectedNode]; nodeName != "" {
		node, ok := c.nodes.Get("", nodeName)
		if !ok {
			return nil, fmt.Errorf("error getting selected node %q: nodes %q not found", nodeName, nodeName)
		}
		csiNode, ok := c.csiNodes.Get("", nodeName)
		if !ok {
			return nil, fmt.Errorf("error getting CSINode for selected node %q: csinodes.storage.k8s.io %q not found", nodeName, nodeName)
		}
		seg, err := nodeSegment(driver, csiNode, node)
		if err != nil {
			return nil, err
		}
		t := topologies([]map[string]string{seg})
		return &csi.TopologyRequirement{Requisite: t, Preferred: t}, nil
	}
	var segs []map[string]string
	if len(sc.AllowedTopologies) > 0 {
		segs = allowedSegments(sc.AllowedTopologies)
	} else {
		for _, cn := range c.csiNodes.List(nil) {
			node, ok := c.nodes.Get("", cn.Name)
			if !ok {
				continue
			}
			if seg, err := nodeSegment(driver, cn, node); err == nil {
				segs = append(segs, seg)
			}
		}
	}
	segs = dedupe(segs)
	if len(segs) == 0 {
		return nil, nil
	}
	t := topologies(segs)
	return &csi.TopologyRequirement{Requisite: t, Preferred: t}, nil
}

// newPV is the PV external-provisioner creates for a volume.
func newPV(pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, req *csi.CreateVolumeRequest, vol *csi.Volume) *corev1.PersistentVolume {
	size := vol.GetCapacityBytes()
	if size == 0 {
		size = req.CapacityRange.RequiredBytes
	}
	policy := corev1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		policy = *sc.ReclaimPolicy
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: req.Name, Annotations: map[string]string{binding.AnnDynamicallyProvisioned: sc.Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:  pvc.Spec.AccessModes,
			MountOptions: sc.MountOptions,
			Capacity:     corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: sc.Provisioner, VolumeHandle: vol.GetVolumeId(), VolumeAttributes: vol.GetVolumeContext(),
				FSType: sc.Parameters[paramFSType]}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name,
				UID: pvc.UID, ResourceVersion: pvc.ResourceVersion},
			PersistentVolumeReclaimPolicy: policy,
			StorageClassName:              sc.Name,
			VolumeMode:                    pvc.Spec.VolumeMode,
			NodeAffinity:                  VolumeNodeAffinity(vol.GetAccessibleTopology()),
		},
	}
	if policy == corev1.PersistentVolumeReclaimDelete {
		pv.Finalizers = []string{Finalizer}
	}
	return pv
}
