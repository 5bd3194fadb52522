package storagee2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controllers/csiattacher"
	"github.com/cairn-dev/cairn/services/controllers/csiprovisioner"
	"github.com/cairn-dev/cairn/services/controllers/csiresizer"
	"github.com/cairn-dev/cairn/services/controllers/manager"
	"github.com/cairn-dev/cairn/services/controllers/persistentvolume"
	"github.com/cairn-dev/cairn/services/controllers/persistentvolume/binding"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/csi/hostpath"
	"github.com/cairn-dev/cairn/services/csi/hostpath/hostpathtest"
	"github.com/cairn-dev/cairn/services/scheduler"
	"github.com/cairn-dev/cairn/services/scheduler/plugins/volumebinding"
)

const (
	wait       = 60 * time.Second
	ns         = "default"
	driverNode = "node-a" // runs the driver, registered in its CSINode
	otherNode  = "node-b" // no driver
)

// storage is a control plane with the controller-manager (PV controller
// and CSI provisioner dialling the real hostpath driver), the scheduler,
// two nodes, and the driver serving node-a.
type storage struct {
	*controlplanetest.Env
	driver *hostpathtest.Driver
}

func startStorage(t *testing.T) *storage {
	t.Helper()
	env := controlplanetest.Start(t)
	driver := hostpathtest.Start(t, driverNode, 0)
	log := controlplanetest.Logger("STORAGE_TEST_LOG")
	m, err := manager.New(manager.Config{RestConfig: env.ConfigFor(controlplanetest.ControllerToken), JS: env.JS,
		CSIEndpoints: map[string]string{hostpath.DriverName: driver.Endpoint}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	s, err := scheduler.New(scheduler.Config{RestConfig: env.ConfigFor(controlplanetest.SchedulerToken), JS: env.JS, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, s)
	st := &storage{Env: env, driver: driver}
	ctx := context.Background()
	for _, name := range []string{driverNode, otherNode} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
		if name == driverNode {
			n.Labels[hostpath.TopologyKey] = name
		}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods: resource.MustParse("110")}
		n.Status.Capacity = n.Status.Allocatable
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What the kubelet's plugin registration writes for the driver on
	// node-a (NodeGetInfo's node id and topology keys).
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: driverNode}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
		Name: hostpath.DriverName, NodeID: driverNode, TopologyKeys: []string{hostpath.TopologyKey}}}}}
	if _, err := env.Client.StorageV1().CSINodes().Create(ctx, cn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return st
}

func (s *storage) class(t *testing.T, name, provisioner string, mode storagev1.VolumeBindingMode, reclaim corev1.PersistentVolumeReclaimPolicy) {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner,
		VolumeBindingMode: &mode, ReclaimPolicy: &reclaim}
	if _, err := s.Client.StorageV1().StorageClasses().Create(context.Background(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (s *storage) claim(t *testing.T, name string, class *string, size string, sel *metav1.LabelSelector) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: class, Selector: sel,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	got, err := s.Client.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (s *storage) pod(t *testing.T, name, claim string) { s.podOn(t, name, claim, "") }

// podOn makes a pod using claim, bound to node when node is not "".
func (s *storage) podOn(t *testing.T, name, claim, node string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{{Name: "c", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
	controlplanetest.CreatePod(t, s.Env, p)
}

func (s *storage) getClaim(t *testing.T, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := s.Client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pvc
}

// getVolume returns the PV, or nil when it does not exist.
func (s *storage) getVolume(t *testing.T, name string) *corev1.PersistentVolume {
	t.Helper()
	pv, err := s.Client.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// waitBound waits for the claim and its volume to be Bound to each other
// and returns both.
func (s *storage) waitBound(t *testing.T, name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	var pv *corev1.PersistentVolume
	controlplanetest.Eventually(t, wait, "claim "+name+" and its volume Bound", func() bool {
		pvc = s.getClaim(t, name)
		if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
			return false
		}
		pv = s.getVolume(t, pvc.Spec.VolumeName)
		return pv != nil && pv.Status.Phase == corev1.VolumeBound && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == pvc.UID
	})
	return pvc, pv
}

func (s *storage) deleteClaim(t *testing.T, name string) {
	t.Helper()
	if err := s.Client.CoreV1().PersistentVolumeClaims(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (s *storage) deletePod(t *testing.T, name string) {
	t.Helper()
	zero := int64(0)
	if err := s.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
}

// eventMessage waits for an Event of reason on the object and returns its
// message.
func (s *storage) eventMessage(t *testing.T, name, reason string) string {
	t.Helper()
	return controlplanetest.WaitForEvent(t, s.Env, ns, name, reason).Message
}

func TestStorage(t *testing.T) {
	s := startStorage(t)
	s.class(t, "wffc", hostpath.DriverName, storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete)
	s.class(t, "immediate", hostpath.DriverName, storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimRetain)
	s.class(t, "local", binding.NotSupportedProvisioner, storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimRetain)
	str := func(v string) *string { return &v }

	t.Run("WaitForFirstConsumer", func(t *testing.T) {
		pvc := s.claim(t, "wffc-data", str("wffc"), "64Mi", nil)
		if got := s.eventMessage(t, pvc.Name, persistentvolume.ReasonWaitForFirstConsumer); got != persistentvolume.MsgWaitForConsumer {
			t.Errorf("WaitForFirstConsumer event %q, want %q", got, persistentvolume.MsgWaitForConsumer)
		}
		if got := s.getClaim(t, pvc.Name); got.Status.Phase != corev1.ClaimPending || got.Spec.VolumeName != "" {
			t.Fatalf("claim without consumer: phase %s volume %q, want Pending and no volume", got.Status.Phase, got.Spec.VolumeName)
		}
		s.pod(t, "wffc-pod", pvc.Name)
		controlplanetest.Eventually(t, wait, "pod scheduled", func() bool {
			return controlplanetest.GetPod(t, s.Env, ns, "wffc-pod").Spec.NodeName != ""
		})
		if node := controlplanetest.GetPod(t, s.Env, ns, "wffc-pod").Spec.NodeName; node != driverNode {
			t.Fatalf("pod on %s; only %s has the driver", node, driverNode)
		}
		got, pv := s.waitBound(t, pvc.Name)
		if sel := got.Annotations[binding.AnnSelectedNode]; sel != driverNode {
			t.Errorf("selected-node %q, want %s", sel, driverNode)
		}
		if got.Annotations[binding.AnnStorageProvisioner] != hostpath.DriverName {
			t.Errorf("storage-provisioner annotation %q", got.Annotations[binding.AnnStorageProvisioner])
		}
		if pv.Name != "pvc-"+string(pvc.UID) || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != hostpath.DriverName {
			t.Fatalf("volume %s csi %+v, want pvc-<uid> of %s", pv.Name, pv.Spec.CSI, hostpath.DriverName)
		}
		if pv.Annotations[binding.AnnDynamicallyProvisioned] != hostpath.DriverName || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
			pv.Spec.StorageClassName != "wffc" {
			t.Errorf("volume provisioned-by %q reclaim %s class %q", pv.Annotations[binding.AnnDynamicallyProvisioned],
				pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName)
		}
		if c := got.Status.Capacity[corev1.ResourceStorage]; c.Cmp(resource.MustParse("64Mi")) < 0 {
			t.Errorf("claim capacity %s, want at least 64Mi", c.String())
		}
		terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
		if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != hostpath.TopologyKey ||
			terms[0].MatchExpressions[0].Values[0] != driverNode {
			t.Errorf("volume node affinity %+v, want %s=%s", terms, hostpath.TopologyKey, driverNode)
		}
		if _, ok := s.driver.Volumes(t)[pv.Spec.CSI.VolumeHandle]; !ok {
			t.Fatalf("the driver has no volume %s", pv.Spec.CSI.VolumeHandle)
		}
		// No CSIDriver object: attachment is required. The attach/detach
		// controller makes the VolumeAttachment, the attacher publishes.
		va := s.waitAttached(t, pv, driverNode)
		if !slices.Contains(va.Finalizers, csiattacher.Finalizer(hostpath.DriverName)) {
			t.Errorf("attachment finalizers %v, want %s", va.Finalizers, csiattacher.Finalizer(hostpath.DriverName))
		}
		if got := s.driver.Volumes(t)[pv.Spec.CSI.VolumeHandle]; !slices.Equal(got, []string{driverNode}) {
			t.Errorf("the driver has the volume published to %v, want [%s]", got, driverNode)
		}
		if fs := s.getVolume(t, pv.Name).Finalizers; !slices.Contains(fs, "external-attacher/hostpath-csi-cairn-dev") {
			t.Errorf("volume finalizers %v, want the attacher's", fs)
		}
		unique := csiattacher.UniqueVolumeName(hostpath.DriverName, pv.Spec.CSI.VolumeHandle)
		controlplanetest.Eventually(t, wait, "node volumesAttached", func() bool {
			n, err := s.Client.CoreV1().Nodes().Get(context.Background(), driverNode, metav1.GetOptions{})
			return err == nil && slices.ContainsFunc(n.Status.VolumesAttached, func(a corev1.AttachedVolume) bool { return a.Name == unique })
		})
		for _, r := range []string{csiprovisioner.ReasonProvisioning, csiprovisioner.ReasonProvisioningSucceeded} {
			s.eventMessage(t, pvc.Name, r)
		}

		// Reclaim Delete: the pod goes (the volume is detached:
		// ControllerUnpublishVolume, the attachment deleted), the claim
		// goes, DeleteVolume, the PV goes.
		s.deletePod(t, "wffc-pod")
		controlplanetest.Eventually(t, wait, "the attachment deleted", func() bool {
			_, err := s.Client.StorageV1().VolumeAttachments().Get(context.Background(), va.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		if got := s.driver.Volumes(t)[pv.Spec.CSI.VolumeHandle]; len(got) != 0 {
			t.Errorf("the volume is still published to %v after detach", got)
		}
		s.deleteClaim(t, pvc.Name)
		controlplanetest.Eventually(t, wait, "the Delete volume deleted", func() bool { return s.getVolume(t, pv.Name) == nil })
		if _, ok := s.driver.Volumes(t)[pv.Spec.CSI.VolumeHandle]; ok {
			t.Errorf("the driver still has volume %s after its PV was deleted", pv.Spec.CSI.VolumeHandle)
		}
	})

	t.Run("Immediate", func(t *testing.T) {
		pvc := s.claim(t, "imm-data", str("immediate"), "32Mi", nil)
		msg := s.eventMessage(t, pvc.Name, persistentvolume.ReasonExternalProvisioning)
		if !strings.Contains(msg, "external provisioner '"+hostpath.DriverName+"'") {
			t.Errorf("ExternalProvisioning event %q", msg)
		}
		got, pv := s.waitBound(t, pvc.Name)
		if _, ok := got.Annotations[binding.AnnSelectedNode]; ok {
			t.Errorf("an Immediate claim got a selected node")
		}
		// Reclaim Retain: the claim goes, the volume is Released and kept,
		// and so is the driver's volume.
		s.deleteClaim(t, pvc.Name)
		controlplanetest.Eventually(t, wait, "the Retain volume Released", func() bool {
			v := s.getVolume(t, pv.Name)
			return v != nil && v.Status.Phase == corev1.VolumeReleased
		})
		if _, ok := s.driver.Volumes(t)[pv.Spec.CSI.VolumeHandle]; !ok {
			t.Errorf("the driver lost the retained volume %s", pv.Spec.CSI.VolumeHandle)
		}
	})

	t.Run("StaticWithSelector", func(t *testing.T) {
		ctx := context.Background()
		for i, tier := range []string{"slow", "fast", "fast"} {
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("static-%d", i), Labels: map[string]string{"tier": tier}},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse([]string{"1Gi", "1Gi", "5Gi"}[i])},
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
						Driver: hostpath.DriverName, VolumeHandle: fmt.Sprintf("static-handle-%d", i)}}}}
			if _, err := s.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		controlplanetest.Eventually(t, wait, "static volumes Available", func() bool {
			for i := range 3 {
				if v := s.getVolume(t, fmt.Sprintf("static-%d", i)); v == nil || v.Status.Phase != corev1.VolumeAvailable {
					return false
				}
			}
			return true
		})
		// "fast" excludes static-0; of static-1 (1Gi) and static-2 (5Gi)
		// the smallest that fits is chosen.
		pvc := s.claim(t, "static-data", str(""), "512Mi", &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "fast"}})
		got, pv := s.waitBound(t, pvc.Name)
		if pv.Name != "static-1" {
			t.Errorf("claim bound to %s, want static-1", pv.Name)
		}
		if got.Annotations[binding.AnnBoundByController] != "yes" || pv.Annotations[binding.AnnBoundByController] != "yes" {
			t.Errorf("bound-by-controller missing: claim %v volume %v", got.Annotations, pv.Annotations)
		}
		if c := got.Status.Capacity[corev1.ResourceStorage]; c.Cmp(resource.MustParse("1Gi")) != 0 {
			t.Errorf("claim capacity %s, want the volume's 1Gi", c.String())
		}
	})

	t.Run("Unsatisfiable", func(t *testing.T) {
		// No class and no volume: Pending, and its pod cannot schedule.
		pvc := s.claim(t, "nothing", str(""), "1Gi", &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "none"}})
		if got := s.eventMessage(t, pvc.Name, persistentvolume.ReasonFailedBinding); got != persistentvolume.MsgNoVolumeNoClass {
			t.Errorf("FailedBinding event %q, want %q", got, persistentvolume.MsgNoVolumeNoClass)
		}
		s.pod(t, "nothing-pod", pvc.Name)
		want := "0/2 nodes are available: " + volumebinding.MsgUnboundImmediate + "."
		s.waitUnschedulable(t, "nothing-pod", want)

		// A WaitForFirstConsumer class nothing provisions, no volume
		// fits: the pod is unschedulable on every node.
		pvc = s.claim(t, "local-data", str("local"), "1Gi", nil)
		s.pod(t, "local-pod", pvc.Name)
		want = "0/2 nodes are available: 2 " + volumebinding.ErrReasonBindConflict + "."
		s.waitUnschedulable(t, "local-pod", want)
		if got := s.getClaim(t, pvc.Name); got.Status.Phase != corev1.ClaimPending {
			t.Errorf("claim %s phase %s, want Pending", pvc.Name, got.Status.Phase)
		}
		if got := s.getClaim(t, "nothing"); got.Status.Phase != corev1.ClaimPending {
			t.Errorf("claim nothing phase %s, want Pending", got.Status.Phase)
		}
	})

	t.Run("AttachError", func(t *testing.T) {
		// A pod put on a node whose CSINode lacks the driver (bypassing
		// the scheduler): the attach/detach controller makes the
		// attachment, the attacher records attachError and leaves it
		// unattached.
		pvc := s.claim(t, "err-data", str("immediate"), "16Mi", nil)
		_, pv := s.waitBound(t, pvc.Name)
		s.podOn(t, "err-pod", pvc.Name, otherNode)
		name := csiattacher.AttachmentName(pv.Spec.CSI.VolumeHandle, hostpath.DriverName, otherNode)
		var got *storagev1.VolumeAttachment
		controlplanetest.Eventually(t, wait, "attachError", func() bool {
			var err error
			got, err = s.Client.StorageV1().VolumeAttachments().Get(context.Background(), name, metav1.GetOptions{})
			return err == nil && got.Status.AttachError != nil
		})
		want := `csinode.storage.k8s.io "` + otherNode + `" not found`
		if got.Status.Attached || !strings.Contains(got.Status.AttachError.Message, want) {
			t.Errorf("attachment status %+v, want unattached with %q", got.Status, want)
		}
		if got := s.driver.Volumes(t)[pv.Spec.CSI.VolumeHandle]; len(got) != 0 {
			t.Errorf("volume published to %v", got)
		}
		// The pod goes: the failed attachment is deleted and detached.
		s.deletePod(t, "err-pod")
		controlplanetest.Eventually(t, wait, "the failed attachment deleted", func() bool {
			_, err := s.Client.StorageV1().VolumeAttachments().Get(context.Background(), name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	})

	t.Run("AttachNotRequired", func(t *testing.T) {
		// A CSIDriver with attachRequired false: no VolumeAttachment.
		no := false
		d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: hostpath.DriverName}, Spec: storagev1.CSIDriverSpec{AttachRequired: &no}}
		if _, err := s.Client.StorageV1().CSIDrivers().Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A pod whose claim binds after the CSIDriver exists: the
		// controller's cache has it by then (it saw the driver before the
		// claim's volume, which was created later in the log).
		pvc := s.claim(t, "noattach-data", str("wffc"), "16Mi", nil)
		s.pod(t, "noattach-pod", pvc.Name)
		_, pv := s.waitBound(t, pvc.Name)
		// The Bound claim and the scheduled pod are in the log; wait until
		// the controller-manager has seen them (a later write of its own
		// shows it): the provisioner's ProvisioningSucceeded Event.
		s.eventMessage(t, pvc.Name, csiprovisioner.ReasonProvisioningSucceeded)
		controlplanetest.WaitForLog(t, s.Env)
		name := csiattacher.AttachmentName(pv.Spec.CSI.VolumeHandle, hostpath.DriverName, driverNode)
		if _, err := s.Client.StorageV1().VolumeAttachments().Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("attachment %s for a driver that needs none: %v", name, err)
		}
	})

	t.Run("Expand", func(t *testing.T) {
		// A class that allows expansion; the bound claim's request grows:
		// ControllerExpandVolume, the PV's capacity grows; the driver needs
		// node expansion, so the claim waits for a kubelet with
		// FileSystemResizePending and storage=NodeResizePending, its
		// status.capacity unchanged (kubelet TestCSIExpand finishes it).
		mode, reclaim, yes := storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete, true
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "expandable"}, Provisioner: hostpath.DriverName,
			VolumeBindingMode: &mode, ReclaimPolicy: &reclaim, AllowVolumeExpansion: &yes}
		if _, err := s.Client.StorageV1().StorageClasses().Create(context.Background(), sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pvc := s.claim(t, "grow-data", str("expandable"), "16Mi", nil)
		got, pv := s.waitBound(t, pvc.Name)
		got.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("48Mi")
		if _, err := s.Client.CoreV1().PersistentVolumeClaims(ns).Update(context.Background(), got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want := resource.MustParse("48Mi")
		controlplanetest.Eventually(t, wait, "claim storage=NodeResizePending", func() bool {
			return s.getClaim(t, pvc.Name).Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimNodeResizePending
		})
		if c := s.getVolume(t, pv.Name).Spec.Capacity[corev1.ResourceStorage]; c.Cmp(want) != 0 {
			t.Errorf("volume capacity %s, want 48Mi", c.String())
		}
		final := s.getClaim(t, pvc.Name)
		if c := final.Status.Capacity[corev1.ResourceStorage]; c.Cmp(resource.MustParse("16Mi")) != 0 {
			t.Errorf("claim capacity %s before node expansion, want 16Mi", c.String())
		}
		if a := final.Status.AllocatedResources[corev1.ResourceStorage]; a.Cmp(want) != 0 {
			t.Errorf("claim allocatedResources %s, want 48Mi", a.String())
		}
		if len(final.Status.Conditions) != 1 || final.Status.Conditions[0].Type != corev1.PersistentVolumeClaimFileSystemResizePending {
			t.Errorf("claim conditions %+v, want FileSystemResizePending only", final.Status.Conditions)
		}
		for _, r := range []string{csiresizer.ReasonResizing, csiresizer.ReasonFileSystemResizeRequired} {
			s.eventMessage(t, pvc.Name, r)
		}
	})

}

// waitUnschedulable waits for the pod's PodScheduled=False Unschedulable
// condition and checks that its message starts with want (the preemption
// part follows).
func (s *storage) waitUnschedulable(t *testing.T, name, want string) {
	t.Helper()
	var msg string
	controlplanetest.Eventually(t, wait, "pod "+name+" Unschedulable", func() bool {
		for _, c := range controlplanetest.GetPod(t, s.Env, ns, name).Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				// The scheduler may try before its caches hold the
				// claim ("not found"); it retries when the claim arrives.
				msg = c.Message
				return strings.HasPrefix(msg, want)
			}
		}
		return false
	})
	if !strings.HasPrefix(msg, want) {
		t.Errorf("pod %s unschedulable: %q, want it to start with %q", name, msg, want)
	}
	if p := controlplanetest.GetPod(t, s.Env, ns, name); p.Spec.NodeName != "" {
		t.Errorf("pod %s bound to %s", name, p.Spec.NodeName)
	}
	s.eventMessage(t, name, "FailedScheduling")
}

// waitAttached waits for the VolumeAttachment of pv on node to be attached
// and returns it.
func (s *storage) waitAttached(t *testing.T, pv *corev1.PersistentVolume, node string) *storagev1.VolumeAttachment {
	t.Helper()
	name := csiattacher.AttachmentName(pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.Driver, node)
	var va *storagev1.VolumeAttachment
	controlplanetest.Eventually(t, wait, "attachment "+name+" attached", func() bool {
		var err error
		va, err = s.Client.StorageV1().VolumeAttachments().Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && va.Status.Attached
	})
	if va.Spec.Attacher != pv.Spec.CSI.Driver || va.Spec.NodeName != node || va.Spec.Source.PersistentVolumeName == nil ||
		*va.Spec.Source.PersistentVolumeName != pv.Name {
		t.Errorf("attachment spec %+v, want %s of %s on %s", va.Spec, pv.Spec.CSI.Driver, pv.Name, node)
	}
	return va
}
