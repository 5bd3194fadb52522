package kubelet

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/controllers/csiattacher"
	"github.com/cairn-dev/cairn/services/csi/mount"
)

// csiPluginDir is the kind directory of CSI volumes in a pod's volumes, as
// kube names it.
const csiPluginDir = "kubernetes.io~csi"

// errNotAttached: the volume's VolumeAttachment is not attached yet; the
// pod waits without an event (the attach/detach controller reports its
// own failures).
var errNotAttached = errors.New("kubelet: volume not attached yet")

// csiVolume is what the kubelet keeps of one CSI volume of a pod, in
// vol_data.json next to its mount (kube's csi plugin keeps the same file):
// enough to unpublish and unstage it when the pod is gone, also after a
// restart, without the pod or its claim.
type csiVolume struct {
	// PodVolume is the pod's name for the volume (spec.volumes[].name);
	// SpecVolID is kube's spec name, the PersistentVolume's name.
	PodVolume    string `json:"podVolumeName"`
	SpecVolID    string `json:"specVolID"`
	Driver       string `json:"driverName"`
	VolumeHandle string `json:"volumeHandle"`
	NodeName     string `json:"nodeName"`
	AttachmentID string `json:"attachmentID,omitempty"`
	// StagingPath is the global mount of a driver with STAGE_UNSTAGE.
	StagingPath string `json:"stagingPath,omitempty"`
	ReadOnly    bool   `json:"readOnly,omitempty"`

	dir string // the volume's directory in the pod (not stored)
}

// target is where the volume is published for the pod's containers.
func (v *csiVolume) target() string { return filepath.Join(v.dir, "mount") }

func (k *Kubelet) csiVolumesDir(uid types.UID) string {
	return filepath.Join(k.podDir(string(uid)), "volumes", csiPluginDir)
}

// csiVolumesOf reads the CSI volumes kept for a pod.
func (k *Kubelet) csiVolumesOf(uid types.UID) []*csiVolume {
	root := k.csiVolumesDir(uid)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []*csiVolume
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "vol_data.json"))
		if err != nil {
			continue
		}
		v := &csiVolume{}
		if json.Unmarshal(b, v) != nil || v.Driver == "" || v.VolumeHandle == "" {
			k.log.Warn("unreadable csi volume data", "dir", dir)
			continue
		}
		v.dir = dir
		out = append(out, v)
	}
	return out
}

// csiTarget is the published path of the pod's volume named name.
func (k *Kubelet) csiTarget(uid types.UID, name string) (string, bool) {
	for _, v := range k.csiVolumesOf(uid) {
		if v.PodVolume == name {
			return v.target(), true
		}
	}
	return "", false
}

// claimName is the claim behind a pod volume: a persistentVolumeClaim's,
// or the claim an ephemeral volume's template makes (POD-VOLUME); "" for
// other volumes.
func claimName(pod *corev1.Pod, v *corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return schemas.EphemeralClaimName(pod, v)
	}
	return ""
}

// stagingPath is the global mount of a volume, kube's
// plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount.
func (k *Kubelet) stagingPath(driver, handle string) string {
	return filepath.Join(k.cfg.RootDir, "plugins", "kubernetes.io", "csi", driver,
		fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), "globalmount")
}

// setupCSIVolumes mounts the pod's claims, as kube's volume manager with
// the csi plugin: for each volume backed by a claim bound to a CSI
// PersistentVolume it waits for the VolumeAttachment to be attached
// (when the CSIDriver requires attaching), reports the volume in use,
// stages it at its global mount (drivers with STAGE_UNSTAGE_VOLUME) and
// publishes it into the pod's volume directory, applying fsGroup when
// the CSIDriver's fsGroupPolicy says so. Every step is idempotent, so a
// sync that stops half-way picks up where it stopped. A failure other
// than waiting for the attach is recorded as a FailedMount event.
func (k *Kubelet) setupCSIVolumes(ctx context.Context, pod *corev1.Pod) error {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if claimName(pod, v) == "" {
			continue
		}
		err := k.setupCSIVolume(ctx, pod, v)
		if errors.Is(err, errNotAttached) {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
		if err != nil {
			k.podEventf(ctx, pod, corev1.EventTypeWarning, ReasonFailedMount, "MountVolume.SetUp failed for volume %q : %v", v.Name, err)
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

// claimVolume is a pod's claim and the PersistentVolume bound to it.
type claimVolume struct {
	pvc      *corev1.PersistentVolumeClaim
	pv       *corev1.PersistentVolume
	readOnly bool
}

// resolveClaim finds the PersistentVolume behind a pod's claim, with
// kube's checks and messages (the volume manager's desired state
// populator).
func (k *Kubelet) resolveClaim(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) (claimVolume, error) {
	name := claimName(pod, v)
	pvc, err := k.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return claimVolume{}, fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, name, err)
	}
	if v.Ephemeral != nil && !metav1.IsControlledBy(pvc, pod) {
		return claimVolume{}, fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pod.Namespace, name, pod.Namespace, pod.Name)
	}
	if pvc.DeletionTimestamp != nil {
		return claimVolume{}, fmt.Errorf("can't start pod because PVC %s/%s is being deleted", pod.Namespace, name)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return claimVolume{}, fmt.Errorf("PVC %s/%s has non-bound phase (%q) or empty pvc.Spec.VolumeName (%q)", pod.Namespace, name, pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	pv, err := k.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return claimVolume{}, fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, name, err)
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return claimVolume{}, fmt.Errorf("PVC %s/%s is bound to PV %s which is not bound to it", pod.Namespace, name, pv.Name)
	}
	if pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return claimVolume{}, fmt.Errorf("PVC %s/%s: block volumes are not supported by this kubelet", pod.Namespace, name)
	}
	if pv.Spec.CSI == nil {
		return claimVolume{}, fmt.Errorf("PV %s: only CSI PersistentVolumes are mounted by this kubelet", pv.Name)
	}
	readOnly := pv.Spec.CSI.ReadOnly || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly)
	return claimVolume{pvc: pvc, pv: pv, readOnly: readOnly}, nil
}

func (k *Kubelet) setupCSIVolume(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) error {
	cv, err := k.resolveClaim(ctx, pod, v)
	if err != nil {
		return err
	}
	pv, readOnly := cv.pv, cv.readOnly
	src := pv.Spec.CSI
	d, ok := k.csi.driver(src.Driver)
	if !ok {
		return fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name %s not found in the list of registered CSI drivers", src.Driver)
	}
	drv, err := k.client.StorageV1().CSIDrivers().Get(ctx, src.Driver, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get CSIDriver %s: %w", src.Driver, err)
	}
	if err != nil {
		drv = nil // no CSIDriver: attach required, no pod info, default fsGroupPolicy
	}
	vol := &csiVolume{PodVolume: v.Name, SpecVolID: pv.Name, Driver: src.Driver, VolumeHandle: src.VolumeHandle,
		NodeName: k.cfg.NodeName, ReadOnly: readOnly, dir: filepath.Join(k.csiVolumesDir(pod.UID), pv.Name)}
	var publishContext map[string]string
	if drv == nil || drv.Spec.AttachRequired == nil || *drv.Spec.AttachRequired {
		vol.AttachmentID = csiattacher.AttachmentName(src.VolumeHandle, src.Driver, k.cfg.NodeName)
		va, err := k.client.StorageV1().VolumeAttachments().Get(ctx, vol.AttachmentID, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && !va.Status.Attached) {
			return errNotAttached
		}
		if err != nil {
			return fmt.Errorf("get VolumeAttachment %s: %w", vol.AttachmentID, err)
		}
		publishContext = va.Status.AttachmentMetadata
	}
	caps := d.info.Node
	if caps[csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		vol.StagingPath = k.stagingPath(src.Driver, src.VolumeHandle)
	}
	// Kept before anything is mounted: a tear-down (after a restart too)
	// finds what to undo, and the node reports the volume in use.
	if err := writeCSIVolume(vol); err != nil {
		return err
	}
	if err := k.ensureInUse(ctx, uniqueVolumeName(src.Driver, src.VolumeHandle)); err != nil {
		return err
	}
	if err := k.stageAndPublish(ctx, pod, d, drv, vol, pv, publishContext); err != nil {
		return err
	}
	// A volume expanded while no pod used it grows on the node now, as
	// kube's mount expands it after SetUp.
	if err := k.expandCSIVolume(ctx, pod, vol, cv.pvc, pv); err != nil {
		return fmt.Errorf("MountVolume.NodeExpandVolume failed: %w", err)
	}
	return nil
}

// stageAndPublish stages the volume at its global mount (drivers with
// STAGE_UNSTAGE_VOLUME), publishes it at its target in the pod and
// applies fsGroup when the CSIDriver's fsGroupPolicy says so, holding
// the node's CSI mutex.
func (k *Kubelet) stageAndPublish(ctx context.Context, pod *corev1.Pod, d *csiDriver, drv *storagev1.CSIDriver, vol *csiVolume,
	pv *corev1.PersistentVolume, publishContext map[string]string) error {
	src, readOnly := pv.Spec.CSI, vol.ReadOnly
	capability := volumeCapability(pv, d.info.Node)
	k.csiMu.Lock()
	defer k.csiMu.Unlock()
	if vol.StagingPath != "" {
		if err := os.MkdirAll(vol.StagingPath, 0o750); err != nil {
			return fmt.Errorf("staging path: %w", err)
		}
		_, err := d.client.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: src.VolumeHandle, PublishContext: publishContext,
			StagingTargetPath: vol.StagingPath, VolumeCapability: capability, VolumeContext: src.VolumeAttributes})
		if err != nil {
			return fmt.Errorf("kubernetes.io/csi: attacher.MountDevice failed: rpc error: %w", err)
		}
	}
	volCtx := map[string]string{}
	for key, val := range src.VolumeAttributes {
		volCtx[key] = val
	}
	if drv != nil && drv.Spec.PodInfoOnMount != nil && *drv.Spec.PodInfoOnMount {
		volCtx["csi.storage.k8s.io/pod.name"] = pod.Name
		volCtx["csi.storage.k8s.io/pod.namespace"] = pod.Namespace
		volCtx["csi.storage.k8s.io/pod.uid"] = string(pod.UID)
		volCtx["csi.storage.k8s.io/serviceAccount.name"] = pod.Spec.ServiceAccountName
		volCtx["csi.storage.k8s.io/ephemeral"] = "false"
	}
	_, err := d.client.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: src.VolumeHandle, PublishContext: publishContext,
		StagingTargetPath: vol.StagingPath, TargetPath: vol.target(), VolumeCapability: capability, Readonly: readOnly, VolumeContext: volCtx})
	if err != nil {
		return fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed: rpc error: %w", err)
	}
	if fsg := pod.Spec.SecurityContext; fsg != nil && fsg.FSGroup != nil && !readOnly && applyFSGroup(drv, pv) {
		if err := setFSGroup(vol.target(), *fsg.FSGroup); err != nil {
			return fmt.Errorf("applying fsGroup %d: %w", *fsg.FSGroup, err)
		}
	}
	return nil
}

func uniqueVolumeName(driver, handle string) corev1.UniqueVolumeName {
	return csiattacher.UniqueVolumeName(driver, handle)
}

func writeCSIVolume(v *csiVolume) error {
	if err := os.MkdirAll(v.dir, 0o750); err != nil {
		return fmt.Errorf("volume dir: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := filepath.Join(v.dir, ".vol_data.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("volume data: %w", err)
	}
	return os.Rename(tmp, filepath.Join(v.dir, "vol_data.json"))
}

// volumeCapability is the CSI capability kube's csi plugin asks for: the
// mount access type with the PV's fsType and mount options, and the
// access mode of its first access mode (ReadWriteOnce is
// SINGLE_NODE_MULTI_WRITER when the driver offers it, as kube maps it).
func volumeCapability(pv *corev1.PersistentVolume, caps map[csi.NodeServiceCapability_RPC_Type]bool) *csi.VolumeCapability {
	mode := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	multi := caps[csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER]
	if len(pv.Spec.AccessModes) > 0 {
		switch pv.Spec.AccessModes[0] {
		case corev1.ReadWriteOnce:
			if multi {
				mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
			}
		case corev1.ReadWriteOncePod:
			if multi {
				mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
			}
		case corev1.ReadOnlyMany:
			mode = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
		case corev1.ReadWriteMany:
			mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		}
	}
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: pv.Spec.CSI.FSType, MountFlags: pv.Spec.MountOptions}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

// applyFSGroup is kube's fsGroupPolicy decision: File always,
// ReadWriteOnceWithFSType (the default) for a ReadWriteOnce volume with an
// fsType, None never.
func applyFSGroup(drv *storagev1.CSIDriver, pv *corev1.PersistentVolume) bool {
	policy := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
	if drv != nil && drv.Spec.FSGroupPolicy != nil {
		policy = *drv.Spec.FSGroupPolicy
	}
	switch policy {
	case storagev1.FileFSGroupPolicy:
		return true
	case storagev1.NoneFSGroupPolicy:
		return false
	}
	return pv.Spec.CSI.FSType != "" && len(pv.Spec.AccessModes) == 1 && pv.Spec.AccessModes[0] == corev1.ReadWriteOnce
}

// setFSGroup is kube's SetVolumeOwnership: every file gets the group,
// group read and write (and execute where the owner has it), and
// directories the setgid bit, so new files inherit the group.
func setFSGroup(dir string, gid int64) error {
	return filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(gid)); err != nil {
			return err
		}
		if e.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		mode := info.Mode() | 0o060
		if info.Mode()&0o100 != 0 {
			mode |= 0o010
		}
		if e.IsDir() {
			mode |= os.ModeSetgid | 0o010
		}
		return os.Chmod(p, mode)
	})
}

// teardownCSIVolumes undoes the pod's CSI volumes from what the kubelet
// kept of them (so also for a pod the API no longer has, after a
// restart): NodeUnpublishVolume, then NodeUnstageVolume once no other
// pod's volume uses the same global mount, then the directories, and
// the node's volumesInUse follows. It stops at the first failure; the
// caller retries.
func (k *Kubelet) teardownCSIVolumes(ctx context.Context, uid types.UID) error {
	vols := k.csiVolumesOf(uid)
	if len(vols) == 0 {
		return nil
	}
	for _, v := range vols {
		if err := k.teardownCSIVolume(ctx, uid, v); err != nil {
			return fmt.Errorf("unmount volume %s: %w", v.SpecVolID, err)
		}
	}
	return k.syncVolumesInUse(ctx)
}

func (k *Kubelet) teardownCSIVolume(ctx context.Context, uid types.UID, v *csiVolume) error {
	k.csiMu.Lock()
	defer k.csiMu.Unlock()
	mounted, err := mount.IsMountPoint(v.target())
	if err != nil {
		return err
	}
	d, registered := k.csi.driver(v.Driver)
	if mounted || exists(v.target()) {
		if !registered {
			return fmt.Errorf("kubernetes.io/csi: driver name %s not found in the list of registered CSI drivers", v.Driver)
		}
		if _, err := d.client.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.VolumeHandle, TargetPath: v.target()}); err != nil {
			return fmt.Errorf("kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: %w", err)
		}
		if mounted, err = mount.IsMountPoint(v.target()); err != nil || mounted {
			return errors.Join(err, fmt.Errorf("%s is still mounted after NodeUnpublishVolume", v.target()))
		}
		if err := os.Remove(v.target()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if v.StagingPath != "" && !k.stagingUsedByOthers(uid, v.StagingPath) {
		staged, err := mount.IsMountPoint(v.StagingPath)
		if err != nil {
			return err
		}
		if staged || exists(v.StagingPath) {
			if !registered {
				return fmt.Errorf("kubernetes.io/csi: driver name %s not found in the list of registered CSI drivers", v.Driver)
			}
			if _, err := d.client.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.VolumeHandle, StagingTargetPath: v.StagingPath}); err != nil {
				return fmt.Errorf("kubernetes.io/csi: attacher.UnmountDevice failed: rpc error: %w", err)
			}
			if staged, err = mount.IsMountPoint(v.StagingPath); err != nil || staged {
				return errors.Join(err, fmt.Errorf("%s is still mounted after NodeUnstageVolume", v.StagingPath))
			}
			if err := os.RemoveAll(filepath.Dir(v.StagingPath)); err != nil {
				return err
			}
		}
	}
	return os.RemoveAll(v.dir)
}

// stagingUsedByOthers: another pod's volume is published from the same
// global mount.
func (k *Kubelet) stagingUsedByOthers(uid types.UID, staging string) bool {
	uids, _ := k.podDirUIDs()
	for _, other := range uids {
		if other == uid {
			continue
		}
		for _, v := range k.csiVolumesOf(other) {
			if v.StagingPath == staging {
				return true
			}
		}
	}
	return false
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
