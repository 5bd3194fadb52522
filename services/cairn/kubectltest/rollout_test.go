package kubectltest

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// controllerTimeout bounds how long the test waits for the controllers
// that `cairn up` runs to act on a change kubectl made.
const controllerTimeout = 20 * time.Second

// replicaSet is one ReplicaSet of the web Deployment as kubectl shows it.
type replicaSet struct {
	name, hash, owner, image string
	replicas, current        int // spec.replicas, status.replicas
	revision                 int // the deployment.kubernetes.io/revision annotation
}

// webPod is one pod of the web Deployment as kubectl shows it.
type webPod struct{ name, hash, phase, owner string }

// rollout is what kubectl shows of the web Deployment, its ReplicaSets and
// their pods. Nothing schedules or runs the pods, so they stay Pending and
// never become ready: a rolling update that replaces pods never finishes.
type rollout struct {
	generation, observed                       int
	replicas, total, updated, ready, available int // spec.replicas and status counts
	sets                                       []replicaSet
	pods                                       []webPod
}

// atoi parses a number kubectl printed; an omitted (zero) status count is
// printed as the empty string.
func atoi(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.Atoi(s)
}

// fields splits a line printed by a jsonpath template into n fields
// separated by "|" and parses the ones at the indexes in nums.
func fields(line string, n int, nums ...int) ([]string, []int, error) {
	f := strings.Split(line, "|")
	if len(f) != n {
		return nil, nil, fmt.Errorf("line %q: %d fields, want %d", line, len(f), n)
	}
	var ints []int
	for _, i := range nums {
		v, err := atoi(f[i])
		if err != nil {
			return nil, nil, fmt.Errorf("line %q: %w", line, err)
		}
		ints = append(ints, v)
	}
	return f, ints, nil
}

// getRollout reads the web Deployment, its ReplicaSets and its pods. The
// three reads are not one snapshot; waitRollout copes with that.
func getRollout(t *testing.T, c *cluster) (rollout, error) {
	t.Helper()
	var r rollout
	out := c.OK(t, "get", "deployment", "web", "-o",
		"jsonpath={.metadata.generation}|{.status.observedGeneration}|{.spec.replicas}|{.status.replicas}|{.status.updatedReplicas}|{.status.readyReplicas}|{.status.availableReplicas}")
	_, n, err := fields(out, 7, 0, 1, 2, 3, 4, 5, 6)
	if err != nil {
		return r, fmt.Errorf("deployment: %w", err)
	}
	r.generation, r.observed, r.replicas, r.total, r.updated, r.ready, r.available = n[0], n[1], n[2], n[3], n[4], n[5], n[6]
	out = c.OK(t, "get", "rs", "-l", "app=web", "-o",
		`jsonpath={range .items[*]}{.metadata.name}|{.metadata.labels.pod-template-hash}|{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}|{.spec.template.spec.containers[?(@.name=="nginx")].image}|{.spec.replicas}|{.status.replicas}|{.metadata.annotations.deployment\.kubernetes\.io/revision}{"\n"}{end}`)
	for _, l := range lines(out) {
		f, n, err := fields(l, 7, 4, 5, 6)
		if err != nil {
			return r, fmt.Errorf("replicaset: %w", err)
		}
		r.sets = append(r.sets, replicaSet{name: f[0], hash: f[1], owner: f[2], image: f[3], replicas: n[0], current: n[1], revision: n[2]})
	}
	out = c.OK(t, "get", "pods", "-l", "app=web", "-o",
		`jsonpath={range .items[*]}{.metadata.name}|{.metadata.labels.pod-template-hash}|{.status.phase}|{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}{"\n"}{end}`)
	for _, l := range lines(out) {
		f, _, err := fields(l, 4)
		if err != nil {
			return r, fmt.Errorf("pod: %w", err)
		}
		r.pods = append(r.pods, webPod{name: f[0], hash: f[1], phase: f[2], owner: f[3]})
	}
	return r, nil
}

var hashRE = regexp.MustCompile(`^[a-z0-9]+$`)

// newest returns the ReplicaSet with the highest revision.
func (r rollout) newest() replicaSet {
	return slices.MaxFunc(r.sets, func(a, b replicaSet) int { return a.revision - b.revision })
}

// check reports why r is not a settled rollout of replicas pods whose
// newest template runs image: the controllers have caught up with the
// spec, each ReplicaSet web-<pod-template-hash> has exactly its desired
// number of Pending pods named after it, and the total stays within the
// default 25% surge. It returns nil when r is settled.
func (r rollout) check(replicas int, image string) error {
	if r.observed != r.generation {
		return fmt.Errorf("deployment status.observedGeneration %d, generation %d", r.observed, r.generation)
	}
	if r.replicas != replicas {
		return fmt.Errorf("deployment spec.replicas %d, want %d", r.replicas, replicas)
	}
	if len(r.sets) == 0 {
		return errors.New("no ReplicaSet with app=web")
	}
	sum := 0
	revisions := map[int]bool{}
	for _, s := range r.sets {
		if !hashRE.MatchString(s.hash) || s.name != "web-"+s.hash {
			return fmt.Errorf("replicaset %s: pod-template-hash %q is not its name's suffix", s.name, s.hash)
		}
		if s.owner != "Deployment/web" {
			return fmt.Errorf("replicaset %s: owner %s, want Deployment/web", s.name, s.owner)
		}
		if s.current != s.replicas {
			return fmt.Errorf("replicaset %s: status.replicas %d, spec.replicas %d", s.name, s.current, s.replicas)
		}
		if s.revision == 0 || revisions[s.revision] {
			return fmt.Errorf("replicaset %s: revision %d missing or not unique", s.name, s.revision)
		}
		revisions[s.revision] = true
		n := 0
		for _, p := range r.pods {
			if p.hash == s.hash {
				n++
			}
		}
		if n != s.replicas {
			return fmt.Errorf("replicaset %s: %d pods, spec.replicas %d", s.name, n, s.replicas)
		}
		sum += s.replicas
	}
	for _, p := range r.pods {
		if !strings.HasPrefix(p.name, "web-"+p.hash+"-") || p.owner != "ReplicaSet/web-"+p.hash {
			return fmt.Errorf("pod %s: hash %q, owner %s: not a pod of ReplicaSet web-<hash>", p.name, p.hash, p.owner)
		}
		if p.phase != "Pending" {
			return fmt.Errorf("pod %s: phase %q, want Pending", p.name, p.phase)
		}
	}
	if len(r.pods) != sum {
		return fmt.Errorf("%d pods, ReplicaSets want %d", len(r.pods), sum)
	}
	nw := r.newest()
	if nw.image != image || nw.replicas < 1 {
		return fmt.Errorf("newest replicaset %s: image %q with %d replicas, want %s with at least 1", nw.name, nw.image, nw.replicas, image)
	}
	if r.total != sum || r.updated != nw.replicas || r.ready != 0 || r.available != 0 {
		return fmt.Errorf("deployment status replicas %d updated %d ready %d available %d, want %d %d 0 0",
			r.total, r.updated, r.ready, r.available, sum, nw.replicas)
	}
	// No old pod ever becomes available, so a rolling update keeps them
	// all and surges by at most maxSurge (25%, rounded up) over replicas.
	if maxTotal := replicas + (replicas+3)/4; sum < replicas || sum > maxTotal {
		return fmt.Errorf("%d pods, want %d to %d", sum, replicas, maxTotal)
	}
	return nil
}

// waitRollout polls until the web Deployment is a settled rollout (see
// rollout.check) and the same in two reads in a row, and returns it.
func waitRollout(t *testing.T, c *cluster, replicas int, image string) rollout {
	t.Helper()
	deadline := time.Now().Add(controllerTimeout)
	var prev string
	for {
		r, err := getRollout(t, c)
		if err == nil {
			err = r.check(replicas, image)
		}
		state := fmt.Sprintf("%+v", r)
		if err == nil && state == prev {
			return r
		}
		prev = ""
		if err == nil {
			prev = state
		}
		if time.Now().After(deadline) {
			t.Fatalf("web deployment not settled within %v: %v\n%s\n%s", controllerTimeout, err, state,
				c.OK(t, "get", "deployment,rs,pods", "-l", "app=web", "-o", "wide", "--show-labels"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkFirstRollout checks, right after the Deployment was created, that
// the controllers gave it one ReplicaSet named after its pod-template-hash
// with one Pending pod, as `kubectl get rs` and `kubectl get pods` print.
func checkFirstRollout(t *testing.T, c *cluster) {
	t.Helper()
	r := waitRollout(t, c, 1, "nginx:1.25")
	if len(r.sets) != 1 || len(r.pods) != 1 {
		t.Fatalf("after creating the deployment: %d ReplicaSets and %d pods, want 1 and 1: %+v", len(r.sets), len(r.pods), r)
	}
	rows := wantHeader(t, c.OK(t, "get", "rs", "-l", "app=web"), "NAME", "DESIRED", "CURRENT", "READY", "AGE")
	if len(rows) != 1 {
		t.Errorf("get rs -l app=web rows = %q, want 1", rows)
	}
	wantRow(t, rows, "web-"+r.sets[0].hash, "1", "1", "0")
	rows = wantHeader(t, c.OK(t, "get", "pods", "-l", "app=web"), "NAME", "READY", "STATUS", "RESTARTS", "AGE")
	if len(rows) != 1 || !strings.HasPrefix(rows[0][0], "web-"+r.sets[0].hash+"-") {
		t.Errorf("get pods -l app=web rows = %q, want one pod web-%s-*", rows, r.sets[0].hash)
	}
	wantRow(t, rows, r.pods[0].name, "0/1", "Pending", "0")
}

// webPods returns the pods of the web Deployment as -o name prints them,
// one a line; it fails the test if there are none.
func webPods(t *testing.T, c *cluster) []string {
	t.Helper()
	pods := lines(c.OK(t, "get", "pods", "-l", "app=web", "-o", "name"))
	if len(pods) == 0 {
		t.Fatalf("the web deployment has no pods")
	}
	return pods
}

// waitFor polls cond every 100ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cond()
}

// waitGone polls until kubectl lists nothing for args, which must include
// -o name.
func waitGone(t *testing.T, c *cluster, args ...string) {
	t.Helper()
	var out string
	if !waitFor(controllerTimeout, func() bool { out = c.OK(t, args...); return out == "" }) {
		t.Errorf("kubectl %s still lists %q after %v", strings.Join(args, " "), out, controllerTimeout)
	}
}
