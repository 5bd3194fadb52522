package kubectltest

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

const storageYAML = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: hostpath.csi.cairn.dev
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteOnce, ReadOnlyMany]
  persistentVolumeReclaimPolicy: Delete
  hostPath: {path: /srv/pv-1}
`

const claimYAML = `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: user}
spec:
  nodeName: node-1
  containers: [{name: c, image: busybox}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]
`

// TestKubectlStorage: kubectl's tables of volumes, claims and classes
// (columns as kube prints them, the default class marked), explain and
// api-resources of the storage kinds, the default class given to a claim,
// a refused resize, and a claim deleted while a pod uses it staying
// Terminating until the pod goes (admission and pvc-protection).
func TestKubectlStorage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	kubectl := cairntest.KubectlPath(t)
	bin := cairntest.Build(t)
	dir := t.TempDir()
	c := startCluster(t, t, bin, kubectl, filepath.Join(dir, "data"), cairntest.FreeAddr(t), filepath.Join(dir, "home"))

	c.RunWith(t, storageYAML, callTimeout, "apply", "-f", "-")
	// The DefaultStorageClass plugin follows classes from the log.
	eventuallyOut(t, "default class applied", func() (string, error) {
		return resultOut(c.RunWith(t, strings.Replace(claimYAML, "name: data", "name: probe", 1), callTimeout,
			"create", "--dry-run=server", "-o", "jsonpath={.spec.storageClassName}", "-f", "-"))
	}, "fast")
	if r := c.RunWith(t, claimYAML, callTimeout, "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("apply claim and pod: %s", r)
	}

	// The PersistentVolume controller makes a new volume Available.
	eventuallyOut(t, "pv-1 Available", func() (string, error) {
		return resultOut(c.RunWith(t, "", callTimeout, "get", "pv", "pv-1", "-o", "jsonpath={.status.phase}"))
	}, "Available")
	out := c.OK(t, "get", "pv,pvc,sc")
	tables := strings.Split(strings.TrimSpace(out), "\n\n")
	if len(tables) != 3 {
		t.Fatalf("get pv,pvc,sc: want three tables\n%s", out)
	}
	rows := wantHeader(t, tables[0], "NAME", "CAPACITY", "ACCESS", "MODES", "RECLAIM", "POLICY", "STATUS", "CLAIM", "STORAGECLASS",
		"VOLUMEATTRIBUTESCLASS", "REASON", "AGE")
	wantRow(t, rows, "persistentvolume/pv-1", "2Gi", "RWO,ROX", "Delete", "Available", "<unset>")
	rows = wantHeader(t, tables[1], "NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE")
	wantRow(t, rows, "persistentvolumeclaim/data", "Pending", "fast", "<unset>")
	rows = wantHeader(t, tables[2], "NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION", "AGE")
	wantRow(t, rows, "storageclass.storage.k8s.io/fast", "(default)", "hostpath.csi.cairn.dev", "Delete", "WaitForFirstConsumer", "false")

	res := c.OK(t, "api-resources", "--api-group=storage.k8s.io", "-o", "name")
	for _, want := range []string{"storageclasses.storage.k8s.io", "csidrivers.storage.k8s.io", "csinodes.storage.k8s.io", "volumeattachments.storage.k8s.io"} {
		if !strings.Contains(res, want+"\n") {
			t.Errorf("api-resources lacks %s:\n%s", want, res)
		}
	}
	if got := c.OK(t, "get", "pvc", "data", "-o", "jsonpath={.metadata.finalizers}"); got != `["kubernetes.io/pvc-protection"]` {
		t.Errorf("claim finalizers = %s", got)
	}
	if ex := c.OK(t, "explain", "pvc.spec.storageClassName"); !strings.Contains(ex, "KIND:       PersistentVolumeClaim") ||
		!strings.Contains(ex, "storageClassName is the name of the StorageClass") {
		t.Errorf("explain pvc.spec.storageClassName:\n%s", ex)
	}
	if ex := c.OK(t, "explain", "sc.volumeBindingMode"); !strings.Contains(ex, "GROUP:      storage.k8s.io") {
		t.Errorf("explain sc.volumeBindingMode:\n%s", ex)
	}
	// A claim not bound cannot grow: its spec is immutable (422).
	if msg := c.Fails(t, "patch", "pvc", "data", "-p", `{"spec":{"resources":{"requests":{"storage":"5Gi"}}}}`); !strings.Contains(msg,
		`The PersistentVolumeClaim "data" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests`) {
		t.Errorf("grow an unbound claim: %s", msg)
	}

	// In use: Terminating until the pod goes.
	c.OK(t, "delete", "pvc", "data", "--wait=false")
	rows = wantHeader(t, c.OK(t, "get", "pvc", "data"), "NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE")
	wantRow(t, rows, "data", "Terminating")
	time.Sleep(time.Second) // give a wrong removal of the finalizer its chance
	if r := c.Run(t, "get", "pvc", "data", "-o", "name"); r.Err != nil {
		t.Fatalf("claim in use went: %s", r)
	}
	c.OK(t, "delete", "pod", "user", "--grace-period=0", "--force")
	r := c.RunWith(t, "", 60*time.Second, "wait", "--for=delete", "pvc/data", "--timeout=45s")
	if r.Err != nil {
		t.Errorf("claim not deleted after its pod: %s", r)
	}
	c.stop(t)
}
