package e2etest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/cairn/up"
	"github.com/cairn-dev/cairn/services/csi/mount"
	"github.com/cairn-dev/cairn/services/kubelet/node"
)

// claimPodYAML is a claim on the default StorageClass (none named) and a
// pod that mounts it at /data and runs cmd.
func claimPodYAML(pod, claim, class, cmd string) string {
	sc := ""
	if class != "" {
		sc = "\n  storageClassName: " + class
	}
	return `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: ` + claim + `
spec:` + sc + `
  accessModes: ["ReadWriteOnce"]
  resources:
    requests:
      storage: 10Mi
---
` + podYAML(pod, claim, cmd)
}

func podYAML(pod, claim, cmd string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: ` + pod + `
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: cairn.local/busybox:1.36
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "` + cmd + `"]
    volumeMounts:
    - name: data
      mountPath: /data
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: ` + claim + `
`
}

const retainClass = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: keep
provisioner: hostpath.csi.cairn.dev
reclaimPolicy: Retain
volumeBindingMode: WaitForFirstConsumer
`

// statefulData is a StatefulSet whose pod keeps an id in its claim: made
// once, by the first pod, and only read by its replacements.
const statefulData = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: kv
spec:
  serviceName: kv
  replicas: 1
  selector:
    matchLabels:
      app: kv
  template:
    metadata:
      labels:
        app: kv
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: kv
        image: cairn.local/busybox:1.36
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "[ -f /data/id ] || cat /proc/sys/kernel/random/uuid > /data/id; sleep 3600"]
        volumeMounts:
        - name: data
          mountPath: /data
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: ["ReadWriteOnce"]
      resources:
        requests:
          storage: 10Mi
`

// TestE2EStorage is issue 18's check on the real node of `cairn up`: its
// CSI driver and default StorageClass are there out of the box; a claim on
// it is provisioned and bound when its pod is scheduled, the pod writes a
// file, a new pod on the same claim reads it; the claim grown while that
// pod runs gets the new size once the kubelet expanded it on the node, and
// the pod keeps running with its data; a cairn up killed with the
// volume mounted comes back with the pod's mount kept, and a later delete
// unmounts it; deleting the claim deletes the volume and its directory
// (Delete), a Retain class keeps both; a StatefulSet's replacement pod
// reads what its predecessor wrote in its claim.
func TestE2EStorage(t *testing.T) {
	kubectl := requireNode(t)
	bin := cairntest.Build(t)
	dataDir, addr := t.TempDir(), cairntest.FreeAddr(t)
	// Runs last: what a failed test leaves mounted or running goes.
	t.Cleanup(func() {
		_ = node.Clean(context.Background(), node.Config{Dir: filepath.Join(dataDir, "node"), NetNS: up.NetNSName(dataDir), CreateNetNS: true}, nil)
		if ms, _ := mount.Under(dataDir); len(ms) > 0 {
			t.Logf("unmounting what the test left: %v", ms)
			for _, m := range ms {
				_ = mount.Unmount(m)
			}
		}
	})
	c := startCluster(t, bin, kubectl, dataDir, addr)
	volumes := filepath.Join(dataDir, "csi-hostpath", "volumes")

	t.Run("default StorageClass and CSINode", func(t *testing.T) {
		poll(t, podWait, "kubectl get sc shows standard (default)", func() error {
			out := c.OK(t, "get", "sc")
			if !strings.Contains(out, "standard (default)") || !strings.Contains(out, "hostpath.csi.cairn.dev") ||
				!strings.Contains(out, "WaitForFirstConsumer") {
				return fmt.Errorf("kubectl get sc:\n%s", out)
			}
			return nil
		})
		poll(t, podWait, "the node's CSINode lists the driver", func() error {
			out := c.Run(t, "get", "csinode", "-o", "jsonpath={.items[*].spec.drivers[*].name}")
			if !strings.Contains(out.Stdout, "hostpath.csi.cairn.dev") {
				return fmt.Errorf("CSINode drivers: %s", out)
			}
			return nil
		})
	})

	var handle string
	t.Run("write, then read from a new pod", func(t *testing.T) {
		c.apply(t, claimPodYAML("writer", "data", "", "echo hello > /data/msg; sleep 3600"))
		c.waitRunning(t, "writer")
		pvc := c.claim(t, "data")
		if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != up.DefaultStorageClass {
			t.Fatalf("claim: phase %s class %v", pvc.Status.Phase, pvc.Spec.StorageClassName)
		}
		handle = c.volumeHandle(t, pvc.Spec.VolumeName)
		poll(t, podWait, "the file in the volume's directory", func() error {
			b, err := os.ReadFile(filepath.Join(volumes, handle, "msg"))
			if err != nil || string(b) != "hello\n" {
				return fmt.Errorf("%q, %v", b, err)
			}
			return nil
		})
		c.OK(t, "delete", "pod", "writer")
		c.apply(t, podYAML("reader", "data", "sleep 3600"))
		c.waitRunning(t, "reader")
		if got := c.OK(t, "exec", "reader", "--", "cat", "/data/msg"); got != "hello\n" {
			t.Errorf("the new pod reads %q, want hello", got)
		}
	})
	t.Run("online expansion keeps the pod and its data", func(t *testing.T) {
		// The default class allows expansion; the driver needs node
		// expansion, which the kubelet does for the running pod.
		before := c.pod(t, "reader")
		c.OK(t, "patch", "pvc", "data", "-p", `{"spec":{"resources":{"requests":{"storage":"20Mi"}}}}`)
		poll(t, podWait, "claim capacity 20Mi, no resize condition left", func() error {
			out := c.OK(t, "get", "pvc", "data", "-o", "jsonpath={.status.capacity.storage} {.status.conditions[*].type}{.status.allocatedResourceStatuses}")
			if strings.TrimSpace(out) != "20Mi" {
				return fmt.Errorf("capacity, conditions, resize status: %q", out)
			}
			return nil
		})
		if pv := c.claim(t, "data").Spec.VolumeName; c.OK(t, "get", "pv", pv, "-o", "jsonpath={.spec.capacity.storage}") != "20Mi" {
			t.Errorf("PV %s capacity is not 20Mi", pv)
		}
		if p := c.pod(t, "reader"); p.UID != before.UID || p.Status.Phase != corev1.PodRunning {
			t.Errorf("reader after the expansion: uid %s phase %s, want %s Running", p.UID, p.Status.Phase, before.UID)
		}
		if got := c.OK(t, "exec", "reader", "--", "cat", "/data/msg"); got != "hello\n" {
			t.Errorf("after the expansion the pod reads %q, want hello", got)
		}
		poll(t, podWait, "FileSystemResizeSuccessful on the claim", func() error {
			if out := c.OK(t, "get", "events", "--field-selector", "involvedObject.name=data,reason=FileSystemResizeSuccessful", "-o", "name"); out == "" {
				return errors.New("no event yet")
			}
			return nil
		})
	})
	if t.Failed() {
		t.FailNow()
	}

	// Killed with the volume mounted, and started again (at the top: the
	// new cairn up outlives the subtests).
	reader := c.pod(t, "reader")
	c.Stop(t, syscall.SIGKILL)
	c = startCluster(t, bin, kubectl, dataDir, addr)
	c.WaitReady(t, readyTimeout, func() error {
		if !strings.Contains(c.Stdout(), "\nnode ready") {
			return errors.New("no node ready line yet")
		}
		return nil
	})
	t.Run("restart keeps the mount, delete unmounts", func(t *testing.T) {
		c.waitRunning(t, "reader")
		if p := c.pod(t, "reader"); p.UID != reader.UID {
			t.Fatalf("reader's uid %s after the restart, want %s", p.UID, reader.UID)
		}
		if got := c.OK(t, "exec", "reader", "--", "cat", "/data/msg"); got != "hello\n" {
			t.Errorf("after the restart the pod reads %q, want hello", got)
		}
		c.OK(t, "exec", "reader", "--", "sh", "-c", "echo again > /data/again")
		if _, err := os.Stat(filepath.Join(volumes, handle, "again")); err != nil {
			t.Errorf("a write after the restart is not in the volume: %v", err)
		}
		podDir := filepath.Join(up.KubeletDir(dataDir), "pods", string(reader.UID))
		// Its volume, and the tmpfs of its service-account token.
		if ms, _ := mount.Under(podDir); len(ms) != 2 || !slices.ContainsFunc(ms, func(m string) bool { return strings.Contains(m, "/kubernetes.io~csi/") }) ||
			!slices.ContainsFunc(ms, func(m string) bool { return strings.Contains(m, "/kubernetes.io~projected/") }) {
			t.Errorf("mounts in the pod's directory after the restart: %v, want its volume and its token's tmpfs", ms)
		}
		c.OK(t, "delete", "pod", "reader")
		poll(t, podWait, "the pod's mounts and directory gone", func() error {
			if ms, _ := mount.Under(filepath.Join(up.KubeletDir(dataDir), "pods")); len(ms) != 0 {
				return fmt.Errorf("mounts left: %v", ms)
			}
			if ms, _ := mount.Under(filepath.Join(up.KubeletDir(dataDir), "plugins")); len(ms) != 0 {
				return fmt.Errorf("global mounts left: %v", ms)
			}
			if _, err := os.Stat(podDir); !os.IsNotExist(err) {
				return fmt.Errorf("pod dir: %v", err)
			}
			return nil
		})
		poll(t, podWait, "the volume detached", func() error {
			if out := c.OK(t, "get", "volumeattachments", "-o", "name"); out != "" {
				return fmt.Errorf("left: %s", out)
			}
			return nil
		})
	})

	t.Run("Delete reclaims the volume", func(t *testing.T) {
		pv := c.claim(t, "data").Spec.VolumeName
		c.OK(t, "delete", "pvc", "data")
		poll(t, podWait, "PV "+pv+" and its directory gone", func() error {
			if out := c.Run(t, "get", "pv", pv); out.Err == nil {
				return fmt.Errorf("PV still there: %s", out.Stdout)
			}
			if _, err := os.Stat(filepath.Join(volumes, handle)); !os.IsNotExist(err) {
				return fmt.Errorf("volume dir: %v", err)
			}
			return nil
		})
	})

	t.Run("Retain keeps it", func(t *testing.T) {
		c.apply(t, retainClass)
		c.apply(t, claimPodYAML("keeper", "kept", "keep", "echo kept > /data/msg; sleep 3600"))
		c.waitRunning(t, "keeper")
		pv := c.claim(t, "kept").Spec.VolumeName
		h := c.volumeHandle(t, pv)
		c.OK(t, "delete", "pod", "keeper")
		c.OK(t, "delete", "pvc", "kept")
		poll(t, podWait, "PV "+pv+" Released", func() error {
			out := c.OK(t, "get", "pv", pv, "-o", "jsonpath={.status.phase}")
			if out != "Released" {
				return fmt.Errorf("phase %q", out)
			}
			return nil
		})
		if b, err := os.ReadFile(filepath.Join(volumes, h, "msg")); err != nil || string(b) != "kept\n" {
			t.Errorf("retained volume's file: %q, %v", b, err)
		}
		c.OK(t, "delete", "pv", pv)
	})

	t.Run("StatefulSet replacement reads its claim", func(t *testing.T) {
		c.apply(t, statefulData)
		c.waitRunning(t, "kv-0")
		var id string
		poll(t, podWait, "kv-0 wrote its id", func() error {
			r := c.Run(t, "exec", "kv-0", "--", "cat", "/data/id")
			id = strings.TrimSpace(r.Stdout)
			if r.Err != nil || id == "" {
				return fmt.Errorf("%s", r)
			}
			return nil
		})
		first := c.pod(t, "kv-0")
		c.OK(t, "delete", "pod", "kv-0")
		poll(t, podWait, "a new kv-0 Running", func() error {
			p := c.pod(t, "kv-0")
			if p.UID == first.UID || p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("kv-0 %s %s", p.UID, p.Status.Phase)
			}
			return nil
		})
		if got := strings.TrimSpace(c.OK(t, "exec", "kv-0", "--", "cat", "/data/id")); got != id {
			t.Errorf("the replacement reads id %q, want its predecessor's %q", got, id)
		}
		c.OK(t, "delete", "sts", "kv")
	})
	c.stop(t)
}

func (c *cluster) apply(t *testing.T, yaml string) {
	t.Helper()
	if r := c.RunWith(t, yaml, callTimeout, "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("apply: %s", r)
	}
}

func (c *cluster) pod(t *testing.T, name string) corev1.Pod {
	t.Helper()
	var p corev1.Pod
	r := c.Run(t, "get", "pod", name, "-o", "json")
	if r.Err != nil {
		return p
	}
	if err := json.Unmarshal([]byte(r.Stdout), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (c *cluster) claim(t *testing.T, name string) corev1.PersistentVolumeClaim {
	t.Helper()
	var pvc corev1.PersistentVolumeClaim
	poll(t, podWait, "claim "+name+" Bound", func() error {
		if err := json.Unmarshal([]byte(c.OK(t, "get", "pvc", name, "-o", "json")), &pvc); err != nil {
			return err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("phase %s", pvc.Status.Phase)
		}
		return nil
	})
	return pvc
}

func (c *cluster) volumeHandle(t *testing.T, pv string) string {
	t.Helper()
	h := c.OK(t, "get", "pv", pv, "-o", "jsonpath={.spec.csi.volumeHandle}")
	if h == "" {
		t.Fatalf("PV %s has no CSI volume handle", pv)
	}
	return h
}
