package e2etest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/services/controllers/manager"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/csi/hostpath"
	"github.com/cairn-dev/cairn/services/csi/hostpath/hostpathtest"
)

// BenchmarkStorageHollow provisions 200 claims (a WaitForFirstConsumer
// class of the real CSI driver hostpath.csi.cairn.dev, reached on its unix
// socket as --csi-endpoint) for 200 pods on 20 hollow nodes, with the real
// controller-manager (PV controller, provisioner, attach/detach and
// attacher) and scheduler (VolumeBinding). The driver is one storage
// domain that every hollow node reaches: each node's CSINode registers the
// driver with the driver's node id and the node carries its topology
// label. It reports claims/s (claims over the time until every claim is
// Bound) and the p50/p99 pod start-up (creation to Running as seen by
// polling) of those pods against 200 pods without volumes started just
// before in the same run (first seen Running by a 100 ms poll). The hollow kubelet does not mount volumes: the
// difference is scheduling with volume binding, provisioning, binding and
// the scheduler's wait in PreBind.
func BenchmarkStorageHollow(b *testing.B) {
	n := envInt("BENCH_STORAGE_CLAIMS", 200)
	nodes := envInt("BENCH_HOLLOW_NODES", 20)
	const domain = "storage-domain"
	for range b.N {
		b.StopTimer()
		env := controlplanetest.Start(b)
		driver := hostpathtest.Start(b, domain, 0)
		log := controlplanetest.Logger("E2E_BENCH_LOG")
		startHollowCluster(b, env, nodes, log, func(c *manager.Config) {
			c.CSIEndpoints = map[string]string{hostpath.DriverName: driver.Endpoint}
		})
		ctx := context.Background()
		l, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, node := range l.Items {
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, hostpath.TopologyKey, domain)
			if _, err := env.Client.CoreV1().Nodes().Patch(ctx, node.Name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
				b.Fatal(err)
			}
			cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node.Name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
				Name: hostpath.DriverName, NodeID: domain, TopologyKeys: []string{hostpath.TopologyKey}}}}}
			if _, err := env.Client.StorageV1().CSINodes().Create(ctx, cn, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		mode, reclaim := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: hostpath.DriverName,
			VolumeBindingMode: &mode, ReclaimPolicy: &reclaim}
		if _, err := env.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		// Let the labels reach the scheduler's cache.
		controlplanetest.WaitForLog(b, env)
		time.Sleep(time.Second)

		b.StartTimer()
		plain := runPods(b, env.Client, "plain", n, false, hollowPod)
		withVolume := runPods(b, env.Client, "vol", n, true, hollowPod)
		bound := withVolume.bound
		b.StopTimer()
		if got := len(driver.Volumes(b)); got != n {
			b.Fatalf("the driver holds %d volumes, want %d", got, n)
		}
		rate := float64(n) / bound.Seconds()
		p50, p99 := quantile(withVolume.startup(), 0.5), quantile(withVolume.startup(), 0.99)
		b50, b99 := quantile(plain.startup(), 0.5), quantile(plain.startup(), 0.99)
		b.ReportMetric(rate, "claims/s")
		b.ReportMetric(p99.Seconds(), "s-startup-p99-volume")
		b.ReportMetric(b99.Seconds(), "s-startup-p99-plain")
		b.ReportMetric(p99.Seconds()/b99.Seconds(), "ratio-p99")
		b.Logf("%d claims provisioned by %s and bound in %v (%.1f claims/s); pod start-up with a volume p50 %v p99 %v, without p50 %v p99 %v (p99 ratio %.2f) on %d hollow nodes (load %s)",
			n, hostpath.DriverName, bound.Round(time.Millisecond), rate, p50.Round(time.Millisecond), p99.Round(time.Millisecond),
			b50.Round(time.Millisecond), b99.Round(time.Millisecond), p99.Seconds()/b99.Seconds(), nodes, loadavg())
	}
}

// podSet is a set of pods created by runPods, with when each was created
// and first seen Running, and how long until every claim was Bound.
type podSet struct {
	mu      sync.Mutex
	created map[string]time.Time
	running map[string]time.Time
	bound   time.Duration
}

func (s *podSet) startup() []time.Duration {
	var out []time.Duration
	for name, t := range s.running {
		out = append(out, t.Sub(s.created[name]))
	}
	return out
}

// hollowPod is a pod for hollow nodes.
func hollowPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "cairn.local/busybox:1.36",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("8Mi")}}}}}}
}

// runPods creates n pods named prefix-i made by newPod (each with a claim
// prefix-i of class standard, mounted at /data, when withClaim) while
// polling every 100 ms until all run and, with claims, every claim is
// Bound.
func runPods(b *testing.B, client kubernetes.Interface, prefix string, n int, withClaim bool, newPod func(string) *corev1.Pod) *podSet {
	b.Helper()
	ctx := context.Background()
	set := &podSet{created: map[string]time.Time{}, running: map[string]time.Time{}}
	class := "standard"
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			for i := range n {
				name := fmt.Sprintf("%s-%d", prefix, i)
				p := newPod(name)
				if withClaim {
					pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class,
						Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}}}
					if _, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
						return err
					}
					p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}
					p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
				}
				set.mu.Lock()
				set.created[name] = time.Now()
				set.mu.Unlock()
				if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	deadline := time.Now().Add(15 * time.Minute)
	created := false
	for {
		select {
		case err := <-errc:
			if err != nil {
				b.Fatal(err)
			}
			created = true
		default:
		}
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		set.mu.Lock()
		for _, p := range pods.Items {
			if _, ours := set.created[p.Name]; ours && p.Status.Phase == corev1.PodRunning {
				if _, seen := set.running[p.Name]; !seen {
					set.running[p.Name] = now
				}
			}
		}
		running := len(set.running)
		set.mu.Unlock()
		if withClaim && set.bound == 0 {
			claims, err := client.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			bound := 0
			for _, c := range claims.Items {
				if c.Status.Phase == corev1.ClaimBound && strings.HasPrefix(c.Name, prefix+"-") {
					bound++
				}
			}
			if bound == n {
				set.bound = now.Sub(start)
			}
		}
		if created && running == n && (!withClaim || set.bound > 0) {
			return set
		}
		if now.After(deadline) {
			b.Fatalf("%s: after 15m %d/%d pods running, claims bound after %v", prefix, running, n, set.bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkStorageRealNode is BenchmarkStorageHollow on the one real node
// of a `cairn up`: its default StorageClass standard (WaitForFirstConsumer,
// the in-process driver hostpath.csi.cairn.dev), the real kubelet staging
// and publishing each claim into its pod and containerd running the
// container with it mounted at /data. Pods without volumes run first,
// then as many pods with a claim each, in the same run (each set deleted
// before the next). The node takes kube's default of 110 pods, so 200 at
// once cannot run there: BENCH_STORAGE_REAL_PODS (default 100) is capped
// at what the node has room for, and the count run is printed. It reports
// claims/s and the p50/p99 pod start-up (creation to first seen Running
// by a 100 ms poll) with a volume against without.
func BenchmarkStorageRealNode(b *testing.B) {
	want := envInt("BENCH_STORAGE_REAL_PODS", 100)
	c, client := startRealNodeBench(b)
	ctx := context.Background()
	room := realNodeRoom(b, client)
	n := min(want, room)
	b.Logf("%d pods per set on the real node (asked for %d; the node has room for %d)", n, want, room)
	poll(b, podWait, "the default StorageClass", func() error {
		_, err := client.StorageV1().StorageClasses().Get(ctx, "standard", metav1.GetOptions{})
		return err
	})
	b.ResetTimer()
	for range b.N {
		plain := runPods(b, client, "plain", n, false, sleepPod)
		b.StopTimer()
		deleteBenchObjects(b, client, false)
		b.StartTimer()
		withVolume := runPods(b, client, "vol", n, true, sleepPod)
		b.StopTimer()
		rate := float64(n) / withVolume.bound.Seconds()
		p50, p99 := quantile(withVolume.startup(), 0.5), quantile(withVolume.startup(), 0.99)
		b50, b99 := quantile(plain.startup(), 0.5), quantile(plain.startup(), 0.99)
		b.ReportMetric(float64(n), "pods")
		b.ReportMetric(rate, "claims/s")
		b.ReportMetric(p99.Seconds(), "s-startup-p99-volume")
		b.ReportMetric(b99.Seconds(), "s-startup-p99-plain")
		b.ReportMetric(p99.Seconds()/b99.Seconds(), "ratio-p99")
		b.Logf("%d claims provisioned by %s and bound in %v (%.1f claims/s); %d pods on the real node: start-up with a staged and published volume p50 %v p99 %v, without p50 %v p99 %v (p99 ratio %.2f; load %s)",
			n, hostpath.DriverName, withVolume.bound.Round(time.Millisecond), rate, n, p50.Round(time.Millisecond), p99.Round(time.Millisecond),
			b50.Round(time.Millisecond), b99.Round(time.Millisecond), p99.Seconds()/b99.Seconds(), loadavg())
		deleteBenchObjects(b, client, true)
		b.StartTimer()
	}
	b.StopTimer()
	c.stop(b)
}

// realNodeRoom is how many more pods the node takes: its allocatable pods
// less the pods already bound to it.
func realNodeRoom(b *testing.B, client kubernetes.Interface) int {
	b.Helper()
	ctx := context.Background()
	var room int
	poll(b, podWait, "the node", func() error {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 1 {
			return fmt.Errorf("nodes: %v, %v", nodes, err)
		}
		pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		room = int(nodes.Items[0].Status.Allocatable.Pods().Value()) - len(pods.Items)
		return nil
	})
	return room
}

// deleteBenchObjects deletes the default namespace's pods (and claims)
// and waits until they, their volumes and their mounts are gone.
func deleteBenchObjects(b *testing.B, client kubernetes.Interface, claims bool) {
	b.Helper()
	ctx := context.Background()
	if err := client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	if claims {
		if err := client.CoreV1().PersistentVolumeClaims("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	poll(b, 10*time.Minute, "benchmark pods, claims and volumes gone", func() error {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pvs, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 || (claims && len(pvs.Items) > 0) {
			return fmt.Errorf("%d pods, %d volumes left", len(pods.Items), len(pvs.Items))
		}
		return nil
	})
}
