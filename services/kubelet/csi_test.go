package kubelet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/services/controllers/csiattacher"
	"github.com/cairn-dev/cairn/services/controllers/manager"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/csi/hostpath"
	"github.com/cairn-dev/cairn/services/csi/hostpath/hostpathtest"
	"github.com/cairn-dev/cairn/services/csi/mount"
	"github.com/cairn-dev/cairn/services/csi/registrar"
	"github.com/cairn-dev/cairn/services/kubelet/container"
	"github.com/cairn-dev/cairn/services/kubelet/hollow"
)

// syncedKubelet lets RunStoppable wait for the kubelet's pod cache.
type syncedKubelet struct{ *Kubelet }

func (k syncedKubelet) WaitForSync(ctx context.Context) error { return k.Pods().WaitForSync(ctx) }

// csiNode is a control plane with the controller-manager (PV controller,
// CSI provisioner and attacher on the real hostpath driver), the driver
// registered through a registration socket in the kubelet's plugin
// directory, and kubelets that can be stopped and started again on the
// same root directory.
type csiNode struct {
	env    *controlplanetest.Env
	driver *hostpathtest.Driver
	root   string
	regDir string
}

const csiNodeName = "csi-node"

func startCSINode(t *testing.T) *csiNode {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("CSI volumes are bind mounts: needs root")
	}
	env := controlplanetest.Start(t)
	driver := hostpathtest.Start(t, csiNodeName, 0)
	root, err := os.MkdirTemp("", "kubelet-csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever a failed test left mounted goes before the directory.
		if ms, _ := mount.Under(root); len(ms) > 0 {
			t.Errorf("mounts left under the kubelet's root: %v", ms)
			for _, m := range ms {
				_ = mount.Unmount(m)
			}
		}
		os.RemoveAll(root)
	})
	n := &csiNode{env: env, driver: driver, root: root, regDir: filepath.Join(root, "plugins_registry")}
	reg, err := registrar.New(registrar.Config{Dir: n.regDir, Driver: hostpath.DriverName, Endpoint: driver.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	controlplanetest.Run(t, runnerFunc(reg.Serve))
	m, err := manager.New(manager.Config{RestConfig: env.ConfigFor(controlplanetest.ControllerToken), JS: env.JS,
		CSIEndpoints: map[string]string{hostpath.DriverName: driver.Endpoint}, Log: controlplanetest.Logger("KUBELET_TEST_LOG")})
	if err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	ctx := context.Background()
	// As cairn up installs them: attaching required, pod info on mount.
	drv := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: hostpath.DriverName}, Spec: storagev1.CSIDriverSpec{
		AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(true), FSGroupPolicy: ptr.To(storagev1.FileFSGroupPolicy)}}
	if _, err := env.Client.StorageV1().CSIDrivers().Create(ctx, drv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fast", "expandable"} {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: hostpath.DriverName,
			ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete), VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
			AllowVolumeExpansion: ptr.To(name == "expandable")}
		if _, err := env.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

type runnerFunc func(context.Context) error

func (f runnerFunc) Run(ctx context.Context) error { return f(ctx) }

// kubelet runs a kubelet with CSI on the node's root directory and rt
// until stop is called (or the test ends).
func (n *csiNode) kubelet(t *testing.T, rt *hollow.Runtime) (*Kubelet, func()) {
	t.Helper()
	cfg := Config{
		RestConfig: n.env.Config, JS: n.env.JS, NodeName: csiNodeName, Runtime: rt, NodeIP: "10.1.0.1",
		RootDir: n.root, PluginRegistrationDir: n.regDir,
		// Short: a running pod's claims are looked at on its syncs.
		ResyncPeriod:       time.Second,
		LeaseRenewInterval: 200 * time.Millisecond, NodeStatusInterval: 200 * time.Millisecond,
		RelistPeriod: 100 * time.Millisecond, Log: controlplanetest.Logger("KUBELET_TEST_LOG"),
	}
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k, controlplanetest.RunStoppable(t, syncedKubelet{k})
}

func newRuntime(t *testing.T) *hollow.Runtime {
	rt, err := hollow.New(hollow.Config{StartDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// claim makes a claim of the Immediate class and waits for it to be Bound.
func (n *csiNode) claim(t *testing.T, name string) *corev1.PersistentVolumeClaim {
	return n.claimOf(t, name, "fast")
}

// claimOf makes a 1Mi claim of class and waits for it to be Bound.
func (n *csiNode) claimOf(t *testing.T, name, class string) *corev1.PersistentVolumeClaim {
	t.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
		StorageClassName: ptr.To(class), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}}}
	if _, err := n.env.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var out *corev1.PersistentVolumeClaim
	eventually(t, 2*wait, "claim "+name+" Bound", func() bool {
		c, err := n.env.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		out = c
		return err == nil && c.Status.Phase == corev1.ClaimBound
	})
	return out
}

// volume is the PV of a bound claim.
func (n *csiNode) volume(t *testing.T, pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	t.Helper()
	pv, err := n.env.Client.CoreV1().PersistentVolumes().Get(context.Background(), pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

func claimPod(name, claim string) *corev1.Pod {
	p := newPod("default", name, csiNodeName)
	p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To(int64(2000))}
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return p
}

func (n *csiNode) waitRunning(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	eventually(t, 2*wait, "pod "+name+" Running", func() bool {
		p = controlplanetest.GetPod(t, n.env, "default", name)
		return p.Status.Phase == corev1.PodRunning
	})
	return p
}

// target is where the kubelet publishes the pod's volume.
func (n *csiNode) target(p *corev1.Pod, pv *corev1.PersistentVolume) string {
	return filepath.Join(n.root, "pods", string(p.UID), "volumes", "kubernetes.io~csi", pv.Name, "mount")
}

func (n *csiNode) staging(pv *corev1.PersistentVolume) string {
	k := &Kubelet{cfg: Config{RootDir: n.root}}
	return k.stagingPath(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
}

func (n *csiNode) node(t *testing.T) *corev1.Node {
	t.Helper()
	node, err := n.env.Client.CoreV1().Nodes().Get(context.Background(), csiNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return node
}

func isMounted(t *testing.T, p string) bool {
	t.Helper()
	ok, err := mount.IsMountPoint(p)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// waitUnmounted waits for the pod to be gone from the API with its
// volume unpublished and unstaged, its directory removed, the volume
// gone from the node's volumesInUse and its VolumeAttachment deleted.
func (n *csiNode) waitUnmounted(t *testing.T, p *corev1.Pod, pv *corev1.PersistentVolume) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 2*wait, "pod "+p.Name+" gone from the API", func() bool {
		_, err := n.env.Client.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	eventually(t, 2*wait, "pod "+p.Name+"'s directory removed", func() bool {
		_, err := os.Stat(filepath.Join(n.root, "pods", string(p.UID)))
		return os.IsNotExist(err)
	})
	if isMounted(t, n.staging(pv)) {
		t.Errorf("global mount %s still mounted", n.staging(pv))
	}
	unique := csiattacher.UniqueVolumeName(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
	eventually(t, 2*wait, "volume gone from volumesInUse", func() bool {
		return !slices.Contains(n.node(t).Status.VolumesInUse, unique)
	})
	va := csiattacher.AttachmentName(pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.Driver, csiNodeName)
	eventually(t, 2*wait, "VolumeAttachment "+va+" deleted", func() bool {
		_, err := n.env.Client.StorageV1().VolumeAttachments().Get(ctx, va, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if pub := n.driver.Volumes(t)[pv.Spec.CSI.VolumeHandle]; len(pub) != 0 {
		t.Errorf("volume still published (attached) to %v", pub)
	}
}

// checkMounted checks that the pod's volume is published at its target
// from the global mount, shows the volume's files, is what the container
// mounts at /data, and is reported in use.
func (n *csiNode) checkMounted(t *testing.T, k *Kubelet, p *corev1.Pod, pv *corev1.PersistentVolume) {
	t.Helper()
	target := n.target(p, pv)
	if !isMounted(t, target) {
		t.Fatalf("%s is not a mount point", target)
	}
	if !isMounted(t, n.staging(pv)) {
		t.Errorf("global mount %s is not a mount point", n.staging(pv))
	}
	file := filepath.Join(target, "from-"+p.Name)
	if err := os.WriteFile(file, []byte(p.Name), 0o644); err != nil {
		t.Fatal(err)
	}
	stored := filepath.Join(n.driver.StateDir, "volumes", pv.Spec.CSI.VolumeHandle, "from-"+p.Name)
	if b, err := os.ReadFile(stored); err != nil || string(b) != p.Name {
		t.Errorf("file written at the target, in the driver's volume directory: %q, %v", b, err)
	}
	mounts, err := k.mounts(p, &p.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(mounts, containerMount(target, "/data")) {
		t.Errorf("container mounts %+v, want %s at /data", mounts, target)
	}
	unique := csiattacher.UniqueVolumeName(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
	if !slices.Contains(n.node(t).Status.VolumesInUse, unique) {
		t.Errorf("node volumesInUse %v, want %s", n.node(t).Status.VolumesInUse, unique)
	}
}

// TestCSIRegistration: a driver's registration socket in the plugin
// directory makes the kubelet write its CSINode (owned by the Node: the
// driver's node id and topology keys) and the node's topology label and
// node id annotation; the driver is told it is registered.
func TestCSIRegistration(t *testing.T) {
	n := startCSINode(t)
	n.kubelet(t, newRuntime(t))
	ctx := context.Background()
	var cn *storagev1.CSINode
	eventually(t, wait, "CSINode with the driver", func() bool {
		var err error
		cn, err = n.env.Client.StorageV1().CSINodes().Get(ctx, csiNodeName, metav1.GetOptions{})
		return err == nil && len(cn.Spec.Drivers) == 1
	})
	d := cn.Spec.Drivers[0]
	if d.Name != hostpath.DriverName || d.NodeID != csiNodeName || !slices.Equal(d.TopologyKeys, []string{hostpath.TopologyKey}) {
		t.Errorf("CSINode driver %+v, want %s with node id %s and topology key %s", d, hostpath.DriverName, csiNodeName, hostpath.TopologyKey)
	}
	if len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].Kind != "Node" || cn.OwnerReferences[0].Name != csiNodeName {
		t.Errorf("CSINode owners %+v, want the Node", cn.OwnerReferences)
	}
	node := n.node(t)
	if got := node.Labels[hostpath.TopologyKey]; got != csiNodeName {
		t.Errorf("node label %s = %q, want %q", hostpath.TopologyKey, got, csiNodeName)
	}
	if got, want := node.Annotations[annotationNodeID], `{"`+hostpath.DriverName+`":"`+csiNodeName+`"}`; got != want {
		t.Errorf("node annotation %s = %q, want %q", annotationNodeID, got, want)
	}

	// A socket that serves no Registration service is refused and never
	// reaches the CSINode.
	lis, err := net.Listen("unix", filepath.Join(n.regDir, "bad.example.com-reg.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	time.Sleep(3 * pluginScanInterval)
	if cn, _ := n.env.Client.StorageV1().CSINodes().Get(ctx, csiNodeName, metav1.GetOptions{}); len(cn.Spec.Drivers) != 1 {
		t.Errorf("CSINode drivers %+v after a socket that is no plugin, want only %s", cn.Spec.Drivers, hostpath.DriverName)
	}
}

func containerMount(host, ctr string) container.Mount {
	return container.Mount{HostPath: host, ContainerPath: ctr}
}

// TestCSIVolumes is the kubelet's side of a claim: a pod's claim is staged
// and published into the pod's volume directory after its attachment,
// reported in volumesInUse, handed to the container; a restarted kubelet
// keeps the running pod's mount, and a later delete unmounts everything
// and lets the attachment go. A pod deleted while its kubelet was down
// (nothing of it left in the runtime either) has its orphaned volume
// unpublished and unstaged by the next kubelet from what it kept on disk.
func TestCSIVolumes(t *testing.T) {
	n := startCSINode(t)
	rt := newRuntime(t)
	// Kubelets started in the subtests live until this test ends.
	top := t
	k, stop := n.kubelet(t, rt)
	pvc := n.claim(t, "data")
	pv := n.volume(t, pvc)
	p := controlplanetest.CreatePod(t, n.env, claimPod("writer", "data"))
	p = n.waitRunning(t, "writer")
	n.checkMounted(t, k, p, pv)
	if fi, err := os.Stat(n.target(p, pv)); err != nil || fi.Mode()&os.ModeSetgid == 0 {
		t.Errorf("fsGroup: the volume's root is %v (%v), want setgid", fi.Mode(), err)
	}

	t.Run("restart keeps the mount", func(t *testing.T) {
		stop()
		var st func()
		k, st = n.kubelet(top, rt)
		stop = st
		time.Sleep(2 * time.Second) // a few syncs and orphan rounds
		if p2 := controlplanetest.GetPod(t, n.env, "default", "writer"); p2.UID != p.UID || p2.Status.Phase != corev1.PodRunning {
			t.Fatalf("pod after the restart: uid %s phase %s", p2.UID, p2.Status.Phase)
		}
		n.checkMounted(t, k, p, pv)
	})

	t.Run("delete unmounts", func(t *testing.T) {
		if err := n.env.Client.CoreV1().Pods("default").Delete(context.Background(), "writer", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
		n.waitUnmounted(t, p, pv)
		stored := filepath.Join(n.driver.StateDir, "volumes", pv.Spec.CSI.VolumeHandle, "from-writer")
		if _, err := os.Stat(stored); err != nil {
			t.Errorf("the volume's data after the pod went: %v", err)
		}
	})

	t.Run("orphan after restart", func(t *testing.T) {
		p := controlplanetest.CreatePod(t, n.env, claimPod("orphan", "data"))
		p = n.waitRunning(t, "orphan")
		n.checkMounted(t, k, p, pv)
		stop()
		// Gone from the API and from the runtime while no kubelet runs.
		if err := n.env.Client.CoreV1().Pods("default").Delete(context.Background(), "orphan", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
		n.kubelet(top, newRuntime(top))
		n.waitUnmounted(t, p, pv)
	})
}

// TestCSIVolumeErrors: a pod whose claim is not bound waits with kube's
// FailedMount event and nothing mounted.
func TestCSIVolumeErrors(t *testing.T) {
	n := startCSINode(t)
	n.kubelet(t, newRuntime(t))
	controlplanetest.CreatePod(t, n.env, claimPod("lost", "missing"))
	ev := controlplanetest.WaitForEvent(t, n.env, "default", "lost", ReasonFailedMount)
	if !strings.Contains(ev.Message, `MountVolume.SetUp failed for volume "data"`) || !strings.Contains(ev.Message, "missing") {
		t.Errorf("FailedMount message %q", ev.Message)
	}
	if p := controlplanetest.GetPod(t, n.env, "default", "lost"); p.Status.Phase != corev1.PodPending {
		t.Errorf("pod phase %s, want Pending", p.Status.Phase)
	}
}

// TestCSIExpand: a claim grown while its pod runs is expanded by the
// controller (the driver requires node expansion: FileSystemResizePending,
// storage=NodeResizePending), then by the kubelet: the driver's
// NodeExpandVolume at the pod's target makes the volume present the new
// size, the claim's status.capacity becomes it, its resize conditions and
// status go, FileSystemResizeSuccessful is recorded on the pod and the
// claim; the pod keeps running on its mount and its data. A claim grown
// while no pod uses it waits for the node, and the next pod's mount
// finishes it.
func TestCSIExpand(t *testing.T) {
	n := startCSINode(t)
	k, _ := n.kubelet(t, newRuntime(t))
	ctx := context.Background()
	claims := n.env.Client.CoreV1().PersistentVolumeClaims("default")
	pvc := n.claimOf(t, "grow", "expandable")
	pv := n.volume(t, pvc)
	p := controlplanetest.CreatePod(t, n.env, claimPod("user", "grow"))
	p = n.waitRunning(t, "user")
	n.checkMounted(t, k, p, pv)

	grow := func(size string) {
		t.Helper()
		patch := `{"spec":{"resources":{"requests":{"storage":"` + size + `"}}}}`
		if _, err := claims.Patch(ctx, "grow", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// waitExpanded waits for the claim's capacity to be size with nothing
	// of the resize left, and checks what the driver presents at target.
	waitExpanded := func(size, target string) {
		t.Helper()
		want := resource.MustParse(size)
		var c *corev1.PersistentVolumeClaim
		eventually(t, 2*wait, "claim capacity "+size, func() bool {
			var err error
			c, err = claims.Get(ctx, "grow", metav1.GetOptions{})
			got := c.Status.Capacity[corev1.ResourceStorage]
			return err == nil && got.Cmp(want) == 0
		})
		if len(c.Status.Conditions) != 0 || c.Status.AllocatedResourceStatuses != nil {
			t.Errorf("claim after the resize: conditions %+v, allocatedResourceStatuses %v; want none", c.Status.Conditions, c.Status.AllocatedResourceStatuses)
		}
		st, err := n.driver.Client.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: pv.Spec.CSI.VolumeHandle, VolumePath: target})
		if err != nil || st.GetUsage()[0].GetTotal() != want.Value() {
			t.Errorf("size the driver presents at %s: %v, %v; want %d", target, st, err, want.Value())
		}
	}

	grow("3Mi")
	waitExpanded("3Mi", n.target(p, pv))
	msg := `MountVolume.NodeExpandVolume succeeded for volume "` + pv.Name + `" ` + csiNodeName
	for _, name := range []string{"user", "grow"} {
		if ev := controlplanetest.WaitForEvent(t, n.env, "default", name, ReasonFileSystemResizeSuccessful); ev.Message != msg {
			t.Errorf("%s event on %s: %q, want %q", ReasonFileSystemResizeSuccessful, name, ev.Message, msg)
		}
	}
	if p2 := controlplanetest.GetPod(t, n.env, "default", "user"); p2.UID != p.UID || p2.Status.Phase != corev1.PodRunning {
		t.Errorf("pod after the resize: uid %s phase %s", p2.UID, p2.Status.Phase)
	}
	if b, err := os.ReadFile(filepath.Join(n.target(p, pv), "from-user")); err != nil || string(b) != "user" {
		t.Errorf("the pod's file after the resize: %q, %v", b, err)
	}

	// Offline: no pod, the claim waits for the node; the next mount
	// finishes it.
	if err := n.env.Client.CoreV1().Pods("default").Delete(ctx, "user", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	n.waitUnmounted(t, p, pv)
	grow("5Mi")
	eventually(t, 2*wait, "claim waiting for the node", func() bool {
		c, err := claims.Get(ctx, "grow", metav1.GetOptions{})
		return err == nil && c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimNodeResizePending
	})
	if c, _ := claims.Get(ctx, "grow", metav1.GetOptions{}); len(c.Status.Conditions) != 1 || c.Status.Conditions[0].Type != corev1.PersistentVolumeClaimFileSystemResizePending {
		t.Errorf("claim conditions without a pod %+v, want FileSystemResizePending", c.Status.Conditions)
	}
	p = controlplanetest.CreatePod(t, n.env, claimPod("next", "grow"))
	p = n.waitRunning(t, "next")
	waitExpanded("5Mi", n.target(p, pv))
	if b, err := os.ReadFile(filepath.Join(n.target(p, pv), "from-user")); err != nil || string(b) != "user" {
		t.Errorf("the first pod's file in the next pod: %q, %v", b, err)
	}
	if err := n.env.Client.CoreV1().Pods("default").Delete(ctx, "next", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	n.waitUnmounted(t, p, pv)
}
