package kubectltest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// statefulSetYAML is the headless Service db and the StatefulSet db of 3
// pods that it governs.
const statefulSetYAML = `apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  clusterIP: None
  selector: {app: db}
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
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: busybox:1.36
        command: ["sleep", "3600"]
`

// TestKubectlStatefulSet drives a StatefulSet through the real kubectl
// against a `cairn up` of its own, with a stand-in kubelet that reports
// the pods it admits Running and Ready: the set of 3 comes up in order
// (db-1 is held back, and db-2 does not come before it is ready), each
// pod named and addressed through the headless Service; a deleted pod
// comes back under its name; rollout status, set image, rollout history,
// rollout undo, scale; and the immutable fields are refused with kube's
// message.
func TestKubectlStatefulSet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	kubectl := cairntest.KubectlPath(t)
	bin := cairntest.Build(t)
	dir := t.TempDir()
	c := startCluster(t, t, bin, kubectl, filepath.Join(dir, "data"), cairntest.FreeAddr(t), filepath.Join(dir, "home"))
	var (
		mu      sync.Mutex
		holdOne = true // db-1 stays Pending while set
	)
	cairntest.StartKubelet(t, c.Up.Kubeconfig(), cairntest.KubeletConfig{FinishDeletes: true, Admit: func(p *corev1.Pod) bool {
		mu.Lock()
		defer mu.Unlock()
		return !holdOne || p.Name != "db-1"
	}})
	status := func() string {
		return jsonpath(t, c, "{.status.replicas} {.status.readyReplicas}", "sts", "db")
	}
	pods := func() []string {
		return strings.Fields(jsonpath(t, c, "{.items[*].metadata.name}", "pods", "-l", "app=db"))
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		if !waitFor(rolloutTimeout, cond) {
			t.Fatalf("not within %v: %s\n%s", rolloutTimeout, what, describeStatefulSet(t, c))
		}
	}

	r := c.RunWith(t, statefulSetYAML, callTimeout, "apply", "-f", "-")
	if r.Err != nil || !strings.Contains(r.Stdout, "service/db created") || !strings.Contains(r.Stdout, "statefulset.apps/db created") {
		t.Fatalf("apply: %s", r)
	}

	t.Run("comes up in order", func(t *testing.T) {
		// 2 replicas, 1 ready: the round that saw db-1 Pending did not
		// create db-2, nor does any later one.
		until("db-1 created and held back", func() bool { return status() == "2 1" })
		if got := pods(); !slices.Equal(got, []string{"db-0", "db-1"}) {
			t.Fatalf("pods %v while db-1 is not ready, want [db-0 db-1]", got)
		}
		mu.Lock()
		holdOne = false
		mu.Unlock()
		stsRolloutStatus(t, c, "partitioned roll out complete: 3 new pods have been updated...")
		rows := wantHeader(t, c.OK(t, "get", "sts", "db"), "NAME", "READY", "AGE")
		wantRow(t, rows, "db", "3/3")
		got := jsonpath(t, c, `{range .items[*]}{.spec.hostname}.{.spec.subdomain} {.metadata.labels.apps\.kubernetes\.io/pod-index} {.metadata.labels.statefulset\.kubernetes\.io/pod-name}{"\n"}{end}`,
			"pods", "-l", "app=db")
		if want := "db-0.db 0 db-0\ndb-1.db 1 db-1\ndb-2.db 2 db-2\n"; got != want {
			t.Errorf("pods' hostname.subdomain, pod-index and pod-name:\n%s\nwant\n%s", got, want)
		}
		desc := c.OK(t, "describe", "sts", "db")
		for i := range 3 {
			if want := fmt.Sprintf("create Pod db-%d in StatefulSet db successful", i); !strings.Contains(desc, want) {
				t.Errorf("describe sts db lacks the event %q:\n%s", want, desc)
			}
		}
	})

	t.Run("a deleted pod comes back with its name", func(t *testing.T) {
		uid := jsonpath(t, c, "{.metadata.uid}", "pod", "db-1")
		c.OK(t, "delete", "pod", "db-1")
		until("a new db-1", func() bool {
			r := c.Run(t, "get", "pod", "db-1", "-o", "jsonpath={.metadata.uid} {.spec.hostname} {.status.phase}")
			f := strings.Fields(r.Stdout)
			return r.Err == nil && len(f) == 3 && f[0] != uid && f[1] == "db-1" && f[2] == "Running"
		})
		stsRolloutStatus(t, c, "partitioned roll out complete: 3 new pods have been updated...")
	})

	t.Run("set image, history, undo", func(t *testing.T) {
		c.OK(t, "set", "image", "sts/db", "db=busybox:1.37")
		stsRolloutStatus(t, c, "partitioned roll out complete: 3 new pods have been updated...")
		if got := jsonpath(t, c, "{.items[*].spec.containers[0].image}", "pods", "-l", "app=db"); got != "busybox:1.37 busybox:1.37 busybox:1.37" {
			t.Errorf("images after set image: %q", got)
		}
		if revs := rolloutRevisions(t, c, "statefulset.apps", "db"); !slices.Equal(revs, []string{"1", "2"}) {
			t.Errorf("rollout history revisions = %q, want [1 2]", revs)
		}
		out := c.OK(t, "rollout", "history", "sts/db", "--revision=2")
		if !regexp.MustCompile(`Image:\s+busybox:1\.37\n`).MatchString(out) {
			t.Errorf("rollout history --revision=2:\n%s\nwant Image: busybox:1.37", out)
		}

		if out := c.OK(t, "rollout", "undo", "sts/db"); !strings.Contains(out, "statefulset.apps/db rolled back") {
			t.Errorf("rollout undo = %q", out)
		}
		stsRolloutStatus(t, c, "partitioned roll out complete: 3 new pods have been updated...")
		until("every pod back at busybox:1.36", func() bool {
			return jsonpath(t, c, "{.items[*].spec.containers[0].image}", "pods", "-l", "app=db") == "busybox:1.36 busybox:1.36 busybox:1.36"
		})
		if revs := rolloutRevisions(t, c, "statefulset.apps", "db"); !slices.Equal(revs, []string{"2", "3"}) {
			t.Errorf("rollout history revisions after undo = %q, want [2 3] (revision 1 renumbered)", revs)
		}
		cur, upd := jsonpath(t, c, "{.status.currentRevision}", "sts", "db"), jsonpath(t, c, "{.status.updateRevision}", "sts", "db")
		if cur != upd || !strings.HasPrefix(cur, "db-") {
			t.Errorf("currentRevision %q, updateRevision %q: want equal, db-HASH", cur, upd)
		}
	})

	t.Run("scale", func(t *testing.T) {
		if got := strings.TrimSpace(c.OK(t, "scale", "sts/db", "--replicas=1")); got != "statefulset.apps/db scaled" {
			t.Errorf("scale = %q", got)
		}
		until("db-2 and db-1 gone", func() bool { return slices.Equal(pods(), []string{"db-0"}) })
		until("status 1 1", func() bool { return status() == "1 1" })
		wantRow(t, wantHeader(t, c.OK(t, "get", "sts", "db"), "NAME", "READY", "AGE"), "db", "1/1")
	})

	t.Run("immutable fields", func(t *testing.T) {
		const forbidden = `The StatefulSet "db" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden`
		for _, patch := range []string{
			`{"spec":{"serviceName":"other"}}`,
			`{"spec":{"podManagementPolicy":"Parallel"}}`,
			`{"spec":{"selector":{"matchLabels":{"tier":"x"}},"template":{"metadata":{"labels":{"tier":"x"}}}}}`,
		} {
			if out := c.Fails(t, "patch", "sts", "db", "--type", "merge", "-p", patch); !strings.Contains(out, forbidden) {
				t.Errorf("patch %s: %q, want %q", patch, out, forbidden)
			}
		}
		if got := jsonpath(t, c, "{.spec.serviceName} {.spec.podManagementPolicy} {.spec.selector.matchLabels}", "sts", "db"); got != `db OrderedReady {"app":"db"}` {
			t.Errorf("after refused patches: %q", got)
		}
	})
	c.OK(t, "delete", "sts/db", "svc/db")
	waitGone(t, c, "get", "pods", "-l", "app=db", "-o", "name")
}

// stsRolloutStatus runs `kubectl rollout status sts/db` and requires that
// it returns 0 saying want.
func stsRolloutStatus(t *testing.T, c *cluster, want string) {
	t.Helper()
	r := c.RunWith(t, "", rolloutTimeout+30*time.Second, "rollout", "status", "sts/db", "--timeout=60s")
	if r.Err != nil || !strings.Contains(r.Stdout, want) {
		t.Fatalf("rollout status, want %q: %s\n%s", want, r, describeStatefulSet(t, c))
	}
}

// describeStatefulSet is what a failure shows of the set db.
func describeStatefulSet(t *testing.T, c *cluster) string {
	t.Helper()
	return c.Run(t, "get", "sts/db", "-o", "yaml").Stdout +
		c.Run(t, "get", "pods,controllerrevisions", "-l", "app=db", "-o", "wide", "--show-labels").Stdout
}
