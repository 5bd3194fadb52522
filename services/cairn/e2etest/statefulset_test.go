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

// statefulDB is a headless Service and a StatefulSet of 2 pods of the
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
  replicas: 2
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
`

// TestE2EStatefulSet: on the real node of `cairn up`, a StatefulSet's pods
// db-0 and db-1 run in containerd, db-1 started only after db-0 was
// Ready, each with its hostname; a deleted pod comes back under its name,
// running in containerd again.
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
		if r.Err != nil || !strings.Contains(r.Stdout, "partitioned roll out complete: 2 new pods have been updated") {
			t.Fatalf("rollout status: %s\n%s", r, c.Run(t, "get", "sts,pods", "-o", "wide").Stdout)
		}
	}
	// running waits for db-0 and db-1 Running, each with one container
	// running in containerd.
	running := func() map[string]corev1.Pod {
		t.Helper()
		byName := map[string]corev1.Pod{}
		poll(t, podWait, "db-0 and db-1 Running", func() error {
			clear(byName)
			for _, p := range c.pods(t, "app=db") {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					byName[p.Name] = p
				}
			}
			if len(byName) != 2 {
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
		if n["db-0"] != 1 || n["db-1"] != 1 {
			t.Errorf("containers running in containerd per pod %v, want one each for db-0 and db-1", n)
		}
		return byName
	}
	status()
	first := running()
	if created, ready := first["db-1"].CreationTimestamp.Time, readySince(first["db-0"]); ready.IsZero() || created.Before(ready) {
		t.Errorf("db-1 created at %v, db-0 ready at %v: want db-1 after", created, ready)
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
	running()
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
