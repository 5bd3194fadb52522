package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientretry "k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/services/csi/csiclient"
	"github.com/cairn-dev/cairn/services/csi/registrar"
)

// annotationNodeID is the node annotation in which the kubelet lists each
// registered CSI driver's node id, as kube's nodeinfomanager does.
const annotationNodeID = "csi.volume.kubernetes.io/nodeid"

// pluginScanInterval is how often the registration directory is read
// (kube's plugin watcher uses inotify; a short poll does the same job).
const pluginScanInterval = time.Second

// csiDriver is one registered CSI driver.
type csiDriver struct {
	name   string
	sock   string // its registration socket
	client *csiclient.Client
	info   csiclient.Info
}

// csiPlugins is the kubelet's CSI plugin manager: it watches the plugin
// registration directory, registers the drivers whose sockets appear
// (GetInfo on the registration socket, then the driver's plugin info,
// node capabilities and NodeGetInfo over its own socket), writes the
// node's CSINode, its topology labels and its csi.volume.kubernetes.io/
// nodeid annotation, and deregisters a driver whose socket goes.
type csiPlugins struct {
	k   *Kubelet
	dir string

	mu      sync.Mutex
	drivers map[string]*csiDriver // by driver name
	bySock  map[string]string     // registration socket -> driver name
	failed  map[string]time.Time  // registration socket -> last failure
}

func newCSIPlugins(k *Kubelet, dir string) *csiPlugins {
	return &csiPlugins{k: k, dir: dir, drivers: map[string]*csiDriver{}, bySock: map[string]string{}, failed: map[string]time.Time{}}
}

// driver returns the registered driver of that name.
func (p *csiPlugins) driver(name string) (*csiDriver, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.drivers[name]
	return d, ok
}

// run makes sure the CSINode exists, then registers and deregisters
// drivers as their sockets come and go until ctx ends.
func (p *csiPlugins) run(ctx context.Context) error {
	if err := os.MkdirAll(p.dir, 0o750); err != nil {
		return fmt.Errorf("kubelet: plugin registration dir: %w", err)
	}
	b := &retry{}
	for {
		err := p.k.updateCSINode(ctx, func(*storagev1.CSINode) bool { return false })
		if err == nil {
			break
		}
		p.k.logErr(ctx, "create CSINode", err)
		if !b.wait(ctx) {
			return nil
		}
	}
	t := time.NewTicker(pluginScanInterval)
	defer t.Stop()
	defer p.closeAll()
	for {
		p.scan(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *csiPlugins) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.drivers {
		_ = d.client.Close()
	}
}

// scan registers new sockets and deregisters the drivers whose sockets
// are gone. A registration that failed is tried again after 5 s.
func (p *csiPlugins) scan(ctx context.Context) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		p.k.logErr(ctx, "read plugin registration dir", err)
		return
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.Type()&os.ModeSocket == 0 {
			continue
		}
		sock := filepath.Join(p.dir, e.Name())
		seen[sock] = true
		p.mu.Lock()
		_, known := p.bySock[sock]
		last, failed := p.failed[sock]
		p.mu.Unlock()
		if known || (failed && p.k.now().Sub(last) < 5*time.Second) {
			continue
		}
		err := p.register(ctx, sock)
		if nerr := registrar.Notify(ctx, sock, err); nerr != nil {
			p.k.logErr(ctx, "notify csi plugin", nerr)
		}
		p.mu.Lock()
		if err != nil {
			p.failed[sock] = p.k.now()
		} else {
			delete(p.failed, sock)
		}
		p.mu.Unlock()
		p.k.logErr(ctx, "register csi plugin "+sock, err)
	}
	p.mu.Lock()
	var gone []string
	for sock := range p.bySock {
		if !seen[sock] {
			gone = append(gone, sock)
		}
	}
	for sock := range p.failed {
		if !seen[sock] {
			delete(p.failed, sock)
		}
	}
	p.mu.Unlock()
	for _, sock := range gone {
		p.k.logErr(ctx, "deregister csi plugin "+sock, p.deregister(ctx, sock))
	}
}

// register is kube's csi RegisterPlugin: the driver is reachable and
// answers NodeGetInfo, and the node's CSINode, labels and annotation say
// so.
func (p *csiPlugins) register(ctx context.Context, sock string) error {
	pl, err := registrar.Info(ctx, sock)
	if err != nil {
		return err
	}
	c, err := csiclient.Dial(pl.Endpoint)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := c.NodeInfo(cctx)
	if err == nil && info.Name != pl.Name {
		err = fmt.Errorf("kubelet: csi plugin %s: its driver calls itself %q", pl.Name, info.Name)
	}
	if err == nil && info.NodeID == "" {
		err = fmt.Errorf("kubelet: csi plugin %s: NodeGetInfo returned no node id", pl.Name)
	}
	if err == nil {
		err = p.k.installCSIDriver(ctx, info)
	}
	if err != nil {
		_ = c.Close()
		return err
	}
	d := &csiDriver{name: info.Name, sock: sock, client: c, info: info}
	p.mu.Lock()
	if old, ok := p.drivers[d.name]; ok {
		delete(p.bySock, old.sock)
		_ = old.client.Close()
	}
	p.drivers[d.name], p.bySock[sock] = d, d.name
	p.mu.Unlock()
	p.k.log.Info("csi driver registered", "driver", d.name, "endpoint", pl.Endpoint, "nodeID", info.NodeID, "topology", info.Topology)
	return nil
}

// deregister is kube's csi DeRegisterPlugin: the driver leaves the
// CSINode and the annotation (its topology labels stay, as in kube).
func (p *csiPlugins) deregister(ctx context.Context, sock string) error {
	p.mu.Lock()
	name := p.bySock[sock]
	d := p.drivers[name]
	delete(p.bySock, sock)
	if d != nil && d.sock == sock {
		delete(p.drivers, name)
	}
	p.mu.Unlock()
	if d == nil || d.sock != sock {
		return nil
	}
	_ = d.client.Close()
	p.k.log.Info("csi driver deregistered", "driver", name)
	return p.k.uninstallCSIDriver(ctx, name)
}

// installCSIDriver writes what kube's nodeinfomanager writes for a newly
// registered driver: the node's topology labels and node id annotation,
// then the driver's entry in the CSINode (node id, topology keys, the
// volume limit as allocatable count).
func (k *Kubelet) installCSIDriver(ctx context.Context, info csiclient.Info) error {
	err := k.patchNodeForCSI(ctx, info.Name, info.NodeID, info.Topology)
	if err != nil {
		return err
	}
	keys := slices.Sorted(maps.Keys(info.Topology))
	want := storagev1.CSINodeDriver{Name: info.Name, NodeID: info.NodeID, TopologyKeys: keys}
	if info.MaxVolumesPerNode > 0 {
		want.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(int32(info.MaxVolumesPerNode))}
	}
	return k.updateCSINode(ctx, func(cn *storagev1.CSINode) bool {
		for i, d := range cn.Spec.Drivers {
			if d.Name == want.Name {
				if equalCSINodeDriver(d, want) {
					return false
				}
				cn.Spec.Drivers[i] = want
				return true
			}
		}
		cn.Spec.Drivers = append(cn.Spec.Drivers, want)
		return true
	})
}

func equalCSINodeDriver(a, b storagev1.CSINodeDriver) bool {
	ac, bc := int32(-1), int32(-1)
	if a.Allocatable != nil && a.Allocatable.Count != nil {
		ac = *a.Allocatable.Count
	}
	if b.Allocatable != nil && b.Allocatable.Count != nil {
		bc = *b.Allocatable.Count
	}
	return a.NodeID == b.NodeID && slices.Equal(a.TopologyKeys, b.TopologyKeys) && ac == bc
}

// uninstallCSIDriver removes the driver from the CSINode and the node id
// annotation.
func (k *Kubelet) uninstallCSIDriver(ctx context.Context, name string) error {
	err := k.updateCSINode(ctx, func(cn *storagev1.CSINode) bool {
		n := len(cn.Spec.Drivers)
		cn.Spec.Drivers = slices.DeleteFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == name })
		return len(cn.Spec.Drivers) != n
	})
	if err != nil {
		return err
	}
	return k.patchNodeForCSI(ctx, name, "", nil)
}

// patchNodeForCSI sets (nodeID != "") or removes the driver's entry in
// the node id annotation and adds the topology labels.
func (k *Kubelet) patchNodeForCSI(ctx context.Context, driver, nodeID string, topology map[string]string) error {
	nodes := k.client.CoreV1().Nodes()
	return clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node: %w", err)
		}
		ids := map[string]string{}
		if s := n.Annotations[annotationNodeID]; s != "" {
			_ = json.Unmarshal([]byte(s), &ids)
		}
		if nodeID == "" {
			delete(ids, driver)
		} else {
			ids[driver] = nodeID
		}
		upd := n.DeepCopy()
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		if len(ids) == 0 {
			delete(upd.Annotations, annotationNodeID)
		} else {
			b, _ := json.Marshal(ids)
			upd.Annotations[annotationNodeID] = string(b)
		}
		if upd.Labels == nil {
			upd.Labels = map[string]string{}
		}
		for key, v := range topology {
			if old, ok := n.Labels[key]; ok && old != v {
				return fmt.Errorf("kubelet: csi driver %s: node label %s=%s is already set to %q", driver, key, v, old)
			}
			upd.Labels[key] = v
		}
		if maps.Equal(upd.Labels, n.Labels) && maps.Equal(upd.Annotations, n.Annotations) {
			return nil
		}
		_, err = nodes.Update(ctx, upd, metav1.UpdateOptions{})
		return err
	})
}

// updateCSINode applies change to the node's CSINode (created, owned by
// the Node, when missing) and writes it if change reports a change.
func (k *Kubelet) updateCSINode(ctx context.Context, change func(*storagev1.CSINode) bool) error {
	cns := k.client.StorageV1().CSINodes()
	return clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		cn, err := cns.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			n, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get node: %w", err)
			}
			cn = &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}},
				Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}}}
			change(cn)
			_, err = cns.Create(ctx, cn, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(storagev1.Resource("csinodes"), cn.Name, err)
			}
			return err
		}
		if err != nil {
			return fmt.Errorf("get CSINode: %w", err)
		}
		upd := cn.DeepCopy()
		if !change(upd) {
			return nil
		}
		_, err = cns.Update(ctx, upd, metav1.UpdateOptions{})
		return err
	})
}

// volumesInUse are the CSI volumes with a directory in some pod's volumes
// (set up, being set up or not yet torn down), by kube's unique name,
// sorted: what the node reports in status.volumesInUse, and what the
// attach/detach controller waits to see go before it detaches.
func (k *Kubelet) volumesInUse() []corev1.UniqueVolumeName {
	set := map[corev1.UniqueVolumeName]bool{}
	uids, _ := k.podDirUIDs()
	for _, uid := range uids {
		for _, v := range k.csiVolumesOf(uid) {
			set[uniqueVolumeName(v.Driver, v.VolumeHandle)] = true
		}
	}
	out := slices.Collect(maps.Keys(set))
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// podDirUIDs lists the pod UIDs with a directory under RootDir/pods.
func (k *Kubelet) podDirUIDs() ([]types.UID, error) {
	entries, err := os.ReadDir(filepath.Join(k.cfg.RootDir, "pods"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []types.UID
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, types.UID(e.Name()))
		}
	}
	return out, nil
}

// ensureInUse makes the node's status.volumesInUse list the volume before
// it is staged, as kube's volume manager waits for a volume to be
// "reported in use" before mounting it: from then on the attach/detach
// controller does not detach it under the mount.
func (k *Kubelet) ensureInUse(ctx context.Context, name corev1.UniqueVolumeName) error {
	return clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		n, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node: %w", err)
		}
		if slices.Contains(n.Status.VolumesInUse, name) {
			return nil
		}
		_, err = k.updateNodeStatus(ctx, n, true)
		return err
	})
}

// syncVolumesInUse writes the node status at once when its volumesInUse
// is stale (after a tear-down), so the volume's detach need not wait for
// the next status round.
func (k *Kubelet) syncVolumesInUse(ctx context.Context) error {
	return clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		n, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node: %w", err)
		}
		if slices.Equal(n.Status.VolumesInUse, k.volumesInUse()) {
			return nil
		}
		_, err = k.updateNodeStatus(ctx, n, true)
		return err
	})
}
