package e2etest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// statefulDB is a headless Service and a StatefulSet of 3 pods of the
// offline busybox image; a short grace period keeps deletes fast (sleep
// ignores SIGTERM as PID 1).
const statefulDB = `apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  clusterIP: None
  selector:
    app: db
  ports:
  - port: 5432
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 3
  selector:
    matchLabels:
      app: db
  template:
    metadata:
      labels:
        app: db
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: db
        image: cairn.local/busybox:1.36
        imagePullPolicy: IfNotPresent
        command: ["sleep", "3600"]
        env:
        - name: VERSION
          value: "1"
`

// TestE2EStatefulSet: on the real node of `cairn up`, a StatefulSet's pods
// db-0, db-1 and db-2 run in containerd, each created only after the one
// before it was Ready, each with its hostname; a deleted pod comes back
// under its name, running in containerd again; a template change
// (`kubectl set env`) rolls every pod, and `kubectl rollout undo` rolls
// them back, each pod's container seeing the environment of its
// revision.
func TestE2EStatefulSet(t *testing.T) {
	kubectl := requireNode(t)
	bin := cairntest.Build(t)
	c := startCluster(t, bin, kubectl, t.TempDir(), cairntest.FreeAddr(t))
	cri := c.criClient(t)

	r := c.RunWith(t, statefulDB, callTimeout, "apply", "-f", "-")
	if r.Err != nil || !strings.Contains(r.Stdout, "statefulset.apps/db created") {
		t.Fatalf("apply: %s", r)
	}
	status := func() {
		t.Helper()
		r := c.RunWith(t, "", 3*time.Minute, "rollout", "status", "sts/db", "--timeout=150s")
		if r.Err != nil || !strings.Contains(r.Stdout, "partitioned roll out complete: 3 new pods have been updated") {
			t.Fatalf("rollout status: %s\n%s", r, c.Run(t, "get", "sts,pods", "-o", "wide").Stdout)
		}
	}
	// running waits for db-0, db-1 and db-2 Running, each with one
	// container running in containerd.
	running := func() map[string]corev1.Pod {
		t.Helper()
		byName := map[string]corev1.Pod{}
		poll(t, podWait, "db-0, db-1 and db-2 Running", func() error {
			clear(byName)
			for _, p := range c.pods(t, "app=db") {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					byName[p.Name] = p
				}
			}
			if len(byName) != 3 {
				return fmt.Errorf("pods: %s", c.Run(t, "get", "pods", "-l", "app=db", "-o", "wide").Stdout)
			}
			return nil
		})
		state := runtimeapi.ContainerState_CONTAINER_RUNNING
		n := map[string]int{}
		for _, ct := range criContainers(t, cri, &state) {
			if _, ok := byName[ct.Labels[labelPodName]]; ok {
				n[ct.Labels[labelPodName]]++
			}
		}
		if n["db-0"] != 1 || n["db-1"] != 1 || n["db-2"] != 1 {
			t.Errorf("containers running in containerd per pod %v, want one each for db-0, db-1 and db-2", n)
		}
		return byName
	}
	status()
	first := running()
	for _, pair := range [][2]string{{"db-0", "db-1"}, {"db-1", "db-2"}} {
		// Times are whole seconds: created in the second the previous
		// became Ready counts as after it.
		if created, ready := first[pair[1]].CreationTimestamp.Time, readySince(first[pair[0]]); ready.IsZero() || created.Before(ready) {
			t.Errorf("%s created at %v, %s ready at %v: want %s after", pair[1], created, pair[0], ready, pair[1])
		}
	}
	for name := range first {
		if got := strings.TrimSpace(c.OK(t, "exec", name, "--", "hostname")); got != name {
			t.Errorf("hostname in %s = %q", name, got)
		}
	}

	c.OK(t, "delete", "pod", "db-0")
	poll(t, podWait, "a new db-0", func() error {
		p := c.pods(t, "app=db")
		for _, q := range p {
			if q.Name == "db-0" && q.UID != first["db-0"].UID && q.Status.Phase == corev1.PodRunning {
				return nil
			}
		}
		return fmt.Errorf("pods: %s", c.Run(t, "get", "pods", "-l", "app=db", "-o", "wide").Stdout)
	})
	status()
	before := running()

	// version waits until every pod is a new one (not in old) whose
	// container sees VERSION=want.
	version := func(old map[string]corev1.Pod, want string) map[string]corev1.Pod {
		t.Helper()
		status()
		var now map[string]corev1.Pod
		poll(t, podWait, "every pod replaced", func() error {
			now = running()
			for name, p := range now {
				if p.UID == old[name].UID {
					return fmt.Errorf("%s not replaced yet", name)
				}
			}
			return nil
		})
		for name := range now {
			if got := strings.TrimSpace(c.OK(t, "exec", name, "--", "sh", "-c", "echo $VERSION")); got != want {
				t.Errorf("VERSION in %s = %q, want %s", name, got, want)
			}
		}
		return now
	}
	c.OK(t, "set", "env", "sts/db", "VERSION=2")
	updated := version(before, "2")
	if out := c.OK(t, "rollout", "undo", "sts/db"); !strings.Contains(out, "statefulset.apps/db rolled back") {
		t.Errorf("rollout undo = %q", out)
	}
	version(updated, "1")
	if cur, upd := c.OK(t, "get", "sts", "db", "-o", "jsonpath={.status.currentRevision}"), c.OK(t, "get", "sts", "db", "-o", "jsonpath={.status.updateRevision}"); cur != upd {
		t.Errorf("after undo: currentRevision %q, updateRevision %q, want equal", cur, upd)
	}
	c.OK(t, "delete", "sts/db", "svc/db")
	poll(t, podWait, "the pods gone", func() error {
		if out := c.OK(t, "get", "pods", "-l", "app=db", "-o", "name"); out != "" {
			return fmt.Errorf("left: %s", out)
		}
		return nil
	})
	c.stop(t)
}

// readySince is when p's Ready condition last turned true.
func readySince(p corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
