package kubelet

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// register creates the node, or takes over an existing one with this name
// (a restarted kubelet), retrying until it succeeds or ctx ends.
func (k *Kubelet) register(ctx context.Context) error {
	b := &retry{}
	for {
		err := k.registerOnce(ctx)
		if err == nil {
			return nil
		}
		k.log.Warn("register node", "err", err)
		if !b.wait(ctx) {
			return fmt.Errorf("kubelet: register node: %w", err)
		}
	}
}

func (k *Kubelet) registerOnce(ctx context.Context) error {
	nodes := k.client.CoreV1().Nodes()
	want := k.initialNode()
	_, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		k.log.Info("node registered", "ip", k.nodeIP, "runtime", k.info.Name, "simulated", k.info.Simulated)
		k.nodeConditionEvents(ctx, nil, want.Status.Conditions)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node: %w", err)
	}
	cur, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node: %w", err)
	}
	// Our labels win; others (set by users) stay.
	upd := cur.DeepCopy()
	if upd.Labels == nil {
		upd.Labels = map[string]string{}
	}
	maps.Copy(upd.Labels, want.Labels)
	if !maps.Equal(upd.Labels, cur.Labels) {
		if upd, err = nodes.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update node labels: %w", err)
		}
	}
	_, err = k.updateNodeStatus(ctx, upd, true)
	if err == nil {
		k.log.Info("node re-registered", "ip", k.nodeIP)
	}
	return err
}

// initialNode is the Node the kubelet creates.
func (k *Kubelet) initialNode() *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:   k.cfg.NodeName,
		corev1.LabelOSStable:   runtime.GOOS,
		corev1.LabelArchStable: runtime.GOARCH,
	}
	if k.info.Simulated {
		labels[HollowLabel] = "true"
	}
	maps.Copy(labels, k.cfg.Labels)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: k.cfg.Taints},
	}
	if k.info.Simulated {
		n.Annotations = map[string]string{HollowLabel: "hollow node: runs no containers (benchmarks only)"}
	}
	k.setNodeStatus(n, k.now())
	return n
}

// setNodeStatus fills in the status the kubelet reports; heartbeat is the
// time of the report.
func (k *Kubelet) setNodeStatus(n *corev1.Node, heartbeat time.Time) {
	capacity, allocatable := k.resources()
	n.Status.Capacity, n.Status.Allocatable = capacity, allocatable
	n.Status.Phase = ""
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: k.nodeIP},
		{Type: corev1.NodeHostName, Address: k.cfg.Hostname},
	}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = k.port
	if k.csi != nil {
		n.Status.VolumesInUse = k.volumesInUse()
	}
	n.Status.NodeInfo = k.nodeInfo()
	hb := metav1.NewTime(heartbeat.Truncate(time.Second))
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status"}
	if k.info.Simulated {
		ready.Message = "hollow kubelet is posting ready status (simulated node: runs no containers)"
	}
	want := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory",
			Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure",
			Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID",
			Message: "kubelet has sufficient PID available"},
		ready,
	}
	for i := range want {
		c := &want[i]
		c.LastHeartbeatTime = hb
		c.LastTransitionTime = hb
		for _, old := range n.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	n.Status.Conditions = want
}

// resources are capacity and allocatable: the machine's (or a hollow
// node's defaults), overridden by Config.
func (k *Kubelet) resources() (capacity, allocatable corev1.ResourceList) {
	capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
	if k.info.Simulated {
		capacity[corev1.ResourceCPU] = resource.MustParse("4")
		capacity[corev1.ResourceMemory] = resource.MustParse("16Gi")
		capacity[corev1.ResourceEphemeralStorage] = resource.MustParse("100Gi")
	} else {
		capacity[corev1.ResourceCPU] = *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI)
		if m := memTotal(); m > 0 {
			capacity[corev1.ResourceMemory] = *resource.NewQuantity(m, resource.BinarySI)
		}
		var st syscall.Statfs_t
		if syscall.Statfs(k.cfg.RootDir, &st) == nil {
			capacity[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(st.Blocks)*st.Bsize, resource.BinarySI)
		}
	}
	maps.Copy(capacity, k.cfg.Capacity)
	allocatable = capacity.DeepCopy()
	maps.Copy(allocatable, k.cfg.Allocatable)
	return capacity, allocatable
}

func (k *Kubelet) nodeInfo() corev1.NodeSystemInfo {
	ni := corev1.NodeSystemInfo{
		KubeletVersion:          Version,
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
		ContainerRuntimeVersion: k.info.Name + "://" + k.info.Version,
	}
	if k.info.Simulated {
		ni.OSImage = "hollow node (simulated)"
		ni.MachineID = k.cfg.NodeName
		ni.SystemUUID = k.cfg.NodeName
		return ni
	}
	ni.MachineID = readTrim("/etc/machine-id")
	ni.SystemUUID = readTrim("/sys/class/dmi/id/product_uuid")
	ni.BootID = readTrim("/proc/sys/kernel/random/boot_id")
	ni.KernelVersion = readTrim("/proc/sys/kernel/osrelease")
	ni.OSImage = osImage()
	return ni
}

// updateNodeStatus writes the node's status if it changed (or force), and
// returns whether it wrote. A condition whose status it changed is
// recorded as the kubelet's node event (NodeReady ...).
func (k *Kubelet) updateNodeStatus(ctx context.Context, cur *corev1.Node, force bool) (bool, error) {
	n := cur.DeepCopy()
	k.setNodeStatus(n, k.now())
	if !force && nodeStatusEqual(cur.Status, n.Status) {
		return false, nil
	}
	if _, err := k.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("update node status: %w", err)
	}
	k.nodeConditionEvents(ctx, cur.Status.Conditions, n.Status.Conditions)
	return true, nil
}

// nodeStatusEqual compares statuses ignoring heartbeat times.
func nodeStatusEqual(a, b corev1.NodeStatus) bool {
	strip := func(s corev1.NodeStatus) corev1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

// nodeStatusLoop writes the node status when it changes, and at least every
// NodeStatusReport; it hands a new spec.podCIDR to the runtime.
func (k *Kubelet) nodeStatusLoop(ctx context.Context) error {
	last := k.now()
	cidr := ""
	t := time.NewTicker(k.cfg.NodeStatusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			err = k.registerOnce(ctx)
			k.logErr(ctx, "re-register node", err)
			continue
		}
		if err != nil {
			k.logErr(ctx, "get node", err)
			continue
		}
		if c := cur.Spec.PodCIDR; c != "" && c != cidr {
			if err := k.rt.UpdatePodCIDR(ctx, c); err != nil {
				k.logErr(ctx, "update pod CIDR", err)
			} else {
				cidr = c
			}
		}
		wrote, err := k.updateNodeStatus(ctx, cur, k.now().Sub(last) >= k.cfg.NodeStatusReport)
		if err != nil {
			k.logErr(ctx, "node status", err)
			continue
		}
		if wrote {
			last = k.now()
		}
	}
}

// leaseLoop renews the node's Lease in kube-node-lease every
// LeaseRenewInterval.
func (k *Kubelet) leaseLoop(ctx context.Context) error {
	var lease *coordinationv1.Lease
	t := time.NewTicker(k.cfg.LeaseRenewInterval)
	defer t.Stop()
	for {
		var err error
		lease, err = k.renewLease(ctx, lease)
		k.logErr(ctx, "renew lease", err)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// renewLease updates the lease (creating it if needed) and returns the
// stored lease, or nil after an error so the next round reads it afresh.
func (k *Kubelet) renewLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := k.client.CoordinationV1().Leases(LeaseNamespace)
	now := metav1.NewMicroTime(k.now())
	if lease == nil {
		cur, err := leases.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return k.createLease(ctx, now)
		case err != nil:
			return nil, fmt.Errorf("get lease: %w", err)
		}
		lease = cur
	}
	l := lease.DeepCopy()
	l.Spec.HolderIdentity = ptr.To(k.cfg.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(k.cfg.LeaseDuration / time.Second))
	l.Spec.RenewTime = &now
	out, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update lease: %w", err)
	}
	return out, nil
}

func (k *Kubelet) createLease(ctx context.Context, now metav1.MicroTime) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Namespace: LeaseNamespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(k.cfg.NodeName),
			LeaseDurationSeconds: ptr.To(int32(k.cfg.LeaseDuration / time.Second)),
			RenewTime:            &now,
		},
	}
	if n, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{}); err == nil {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	}
	out, err := k.client.CoordinationV1().Leases(LeaseNamespace).Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create lease: %w", err)
	}
	return out, nil
}

func (k *Kubelet) logErr(ctx context.Context, what string, err error) {
	if err != nil && ctx.Err() == nil {
		k.log.Warn(what, "err", err)
	}
}

func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) >= 2 && fs[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func osImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return runtime.GOOS
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}

// retry is a capped exponential back-off for loops that retry forever.
type retry struct{ cur time.Duration }

// wait sleeps the next back-off; false when ctx ended.
func (r *retry) wait(ctx context.Context) bool {
	r.cur = min(max(2*r.cur, 200*time.Millisecond), 10*time.Second)
	t := time.NewTimer(r.cur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
