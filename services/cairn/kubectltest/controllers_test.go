package kubectltest

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// rolloutTimeout bounds a `kubectl rollout status` and the waits for the
// controllers in the controllers test: generous, for a loaded machine.
const rolloutTimeout = 60 * time.Second

// TestKubectlControllers drives the real kubectl through the life of a
// Deployment against a `cairn up` of its own, with a stand-in kubelet in
// the test process that reports pods Running and Ready: create, rollout
// status, scale, set image, history, undo, pause and resume, a rollout that
// exceeds its progress deadline, and delete with each cascade mode. The
// subtests run in order; each builds on what the previous ones left.
func TestKubectlControllers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	kubectl := cairntest.KubectlPath(t)
	bin := cairntest.Build(t)
	dir := t.TempDir()
	c := startCluster(t, t, bin, kubectl, filepath.Join(dir, "data"), cairntest.FreeAddr(t), filepath.Join(dir, "home"))
	stopKubelet := startKubelet(t, c)

	steps := []struct {
		name string
		fn   func(t *testing.T, c *cluster)
	}{
		{"create", testRolloutCreate},
		{"scale", testRolloutScale},
		{"set image", testRolloutSetImage},
		{"history", testRolloutHistory},
		{"undo", testRolloutUndo},
		{"pause and resume", testRolloutPause},
		{"progress deadline", testRolloutDeadline},
		{"delete background", testDeleteBackground},
		{"delete foreground", testDeleteForeground},
		{"delete orphan", testDeleteOrphan},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.fn(t, c) }) {
			t.Fatalf("step %q failed; later steps depend on it\n%s", s.name, c.Output())
		}
	}
	stopKubelet()
	c.stop(t)
}

// brokenImage marks images the stand-in kubelet never starts: a pod with a
// container whose image contains it stays Pending and never becomes ready.
const brokenImage = "broken"

// startKubelet runs the stand-in kubelet against c until the returned stop
// is called or the test ends: it reports every pod Running and Ready
// through pods/status, unless one of its images is broken.
func startKubelet(t *testing.T, c *cluster) (stop func()) {
	t.Helper()
	return cairntest.StartKubelet(t, c.Up.Kubeconfig(), cairntest.KubeletConfig{Admit: func(p *corev1.Pod) bool {
		return !slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return strings.Contains(c.Image, brokenImage) })
	}})
}

// rolloutStatus runs `kubectl rollout status` on deploy and requires that
// it returns 0 saying the rollout finished.
func rolloutStatus(t *testing.T, c *cluster, deploy string) {
	t.Helper()
	r := c.RunWith(t, "", rolloutTimeout+30*time.Second, "rollout", "status", "deployment/"+deploy, "--timeout=60s")
	if r.Err != nil {
		t.Fatalf("%s\n%s", r, describeDeployment(t, c, deploy))
	}
	if want := fmt.Sprintf("deployment %q successfully rolled out", deploy); !strings.Contains(r.Stdout, want) {
		t.Fatalf("rollout status stdout does not say %q: %s", want, r)
	}
}

// describeDeployment is what a failure message shows of deploy.
func describeDeployment(t *testing.T, c *cluster, deploy string) string {
	t.Helper()
	return c.Run(t, "get", "deployment/"+deploy, "-o", "yaml").Stdout +
		c.Run(t, "get", "rs,pods", "-l", "app="+deploy, "-o", "wide", "--show-labels").Stdout
}

// jsonpath returns `kubectl get args -o jsonpath=tmpl`.
func jsonpath(t *testing.T, c *cluster, tmpl string, args ...string) string {
	t.Helper()
	return c.OK(t, append(append([]string{"get"}, args...), "-o", "jsonpath="+tmpl)...)
}

// eventually polls cond until it returns nil, failing the test with its
// last error after rolloutTimeout.
func eventually(t *testing.T, c *cluster, deploy string, cond func() error) {
	t.Helper()
	var err error
	if !waitFor(rolloutTimeout, func() bool { err = cond(); return err == nil }) {
		t.Fatalf("not within %v: %v\n%s", rolloutTimeout, err, describeDeployment(t, c, deploy))
	}
}

// webSet is a ReplicaSet of the web Deployment as kubectl shows it.
type webSet struct {
	name, image, revision, owner string
	replicas, ready              int
}

// webSets lists the ReplicaSets with app=deploy.
func webSets(t *testing.T, c *cluster, deploy string) ([]webSet, error) {
	t.Helper()
	out := jsonpath(t, c, `{range .items[*]}{.metadata.name}|{.spec.template.spec.containers[0].image}|{.metadata.annotations.deployment\.kubernetes\.io/revision}|{.metadata.ownerReferences[*].name}|{.spec.replicas}|{.status.readyReplicas}{"\n"}{end}`,
		"rs", "-l", "app="+deploy)
	var sets []webSet
	for _, l := range lines(out) {
		f, n, err := fields(l, 6, 4, 5)
		if err != nil {
			return nil, err
		}
		sets = append(sets, webSet{name: f[0], image: f[1], revision: f[2], owner: f[3], replicas: n[0], ready: n[1]})
	}
	return sets, nil
}

// setWithImage returns the ReplicaSet running image, if there is one.
func setWithImage(sets []webSet, image string) (webSet, bool) {
	i := slices.IndexFunc(sets, func(s webSet) bool { return s.image == image })
	if i < 0 {
		return webSet{}, false
	}
	return sets[i], true
}

// waitSettled waits until deploy's ReplicaSet running image has all
// replicas ready, every other one is scaled to zero, and the Deployment's
// revision annotation is revision; it returns the ReplicaSets.
func waitSettled(t *testing.T, c *cluster, deploy, image string, replicas int, revision string) []webSet {
	t.Helper()
	var sets []webSet
	eventually(t, c, deploy, func() error {
		var err error
		if sets, err = webSets(t, c, deploy); err != nil {
			return err
		}
		for _, s := range sets {
			if s.owner != deploy {
				return fmt.Errorf("replicaset %s owned by %q, want %s", s.name, s.owner, deploy)
			}
			if s.image == image {
				if s.replicas != replicas || s.ready != replicas {
					return fmt.Errorf("new replicaset %s: %d replicas, %d ready, want %d", s.name, s.replicas, s.ready, replicas)
				}
			} else if s.replicas != 0 {
				return fmt.Errorf("old replicaset %s (%s): %d replicas, want 0", s.name, s.image, s.replicas)
			}
		}
		if _, ok := setWithImage(sets, image); !ok {
			return fmt.Errorf("no replicaset with image %s: %+v", image, sets)
		}
		got := jsonpath(t, c, `{.spec.template.spec.containers[0].image}|{.metadata.annotations.deployment\.kubernetes\.io/revision}|{.status.readyReplicas}|{.status.updatedReplicas}`, "deployment", deploy)
		if want := fmt.Sprintf("%s|%s|%d|%d", image, revision, replicas, replicas); got != want {
			return fmt.Errorf("deployment image|revision|ready|updated = %q, want %q", got, want)
		}
		pods := lines(jsonpath(t, c, `{range .items[*]}{.metadata.name}|{.status.phase}|{.spec.containers[0].image}{"\n"}{end}`, "pods", "-l", "app="+deploy))
		if len(pods) != replicas {
			return fmt.Errorf("%d pods, want %d: %q", len(pods), replicas, pods)
		}
		for _, p := range pods {
			if !strings.HasSuffix(p, "|Running|"+image) {
				return fmt.Errorf("pod %s, want Running with %s", p, image)
			}
		}
		return nil
	})
	return sets
}

func testRolloutCreate(t *testing.T, c *cluster) {
	out := c.OK(t, "create", "deployment", "web", "--image=busybox:1.36", "--replicas=2")
	if want := "deployment.apps/web created"; !strings.Contains(out, want) {
		t.Errorf("create deployment = %q, want %q", out, want)
	}
	rolloutStatus(t, c, "web")
	sets := waitSettled(t, c, "web", "busybox:1.36", 2, "1")
	if len(sets) != 1 {
		t.Errorf("%d ReplicaSets after create, want 1: %+v", len(sets), sets)
	}
	rows := wantHeader(t, c.OK(t, "get", "deployment", "web"), "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE")
	wantRow(t, rows, "web", "2/2", "2", "2")
}

func testRolloutScale(t *testing.T, c *cluster) {
	out := c.OK(t, "scale", "deployment", "web", "--replicas=4")
	if want := "deployment.apps/web scaled"; !strings.Contains(out, want) {
		t.Errorf("scale = %q, want %q", out, want)
	}
	rolloutStatus(t, c, "web")
	sets := waitSettled(t, c, "web", "busybox:1.36", 4, "1")
	if len(sets) != 1 {
		t.Errorf("%d ReplicaSets after scale, want 1: %+v", len(sets), sets)
	}
}

func testRolloutSetImage(t *testing.T, c *cluster) {
	out := c.OK(t, "set", "image", "deployment/web", "busybox=busybox:1.37")
	if want := "deployment.apps/web image updated"; !strings.Contains(out, want) {
		t.Errorf("set image = %q, want %q", out, want)
	}
	rolloutStatus(t, c, "web")
	sets := waitSettled(t, c, "web", "busybox:1.37", 4, "2")
	if len(sets) != 2 {
		t.Fatalf("%d ReplicaSets after set image, want 2: %+v", len(sets), sets)
	}
	old, _ := setWithImage(sets, "busybox:1.36")
	nw, _ := setWithImage(sets, "busybox:1.37")
	if old.revision != "1" || nw.revision != "2" || nw.ready != 4 {
		t.Errorf("ReplicaSets %+v, want busybox:1.36 at revision 1 and busybox:1.37 at revision 2 with 4 ready", sets)
	}
}

// historyRevisions returns the revisions `kubectl rollout history` lists.
func historyRevisions(t *testing.T, c *cluster, deploy string) []string {
	t.Helper()
	return rolloutRevisions(t, c, "deployment.apps", deploy)
}

// rolloutRevisions returns the revisions `kubectl rollout history` lists
// for the object name of kind (as kubectl names it, e.g.
// statefulset.apps).
func rolloutRevisions(t *testing.T, c *cluster, kind, name string) []string {
	t.Helper()
	out := c.OK(t, "rollout", "history", kind+"/"+name)
	ls := lines(out)
	if len(ls) < 2 || !strings.HasPrefix(ls[0], kind+"/"+name) {
		t.Fatalf("rollout history:\n%s\nwant a %s/%s title and a table", out, kind, name)
	}
	_, rows := table(t, strings.Join(ls[1:], "\n"))
	var revs []string
	for _, r := range rows {
		revs = append(revs, r[0])
	}
	return revs
}

func testRolloutHistory(t *testing.T, c *cluster) {
	if revs := historyRevisions(t, c, "web"); !slices.Equal(revs, []string{"1", "2"}) {
		t.Errorf("rollout history revisions = %q, want [1 2]", revs)
	}
	out := c.OK(t, "rollout", "history", "deployment/web", "--revision=2")
	if !strings.Contains(out, "revision #2") || !regexp.MustCompile(`Image:\s+busybox:1\.37\n`).MatchString(out) {
		t.Errorf("rollout history --revision=2:\n%s\nwant revision #2 with Image: busybox:1.37", out)
	}
	out = c.OK(t, "rollout", "history", "deployment/web", "--revision=1")
	if !regexp.MustCompile(`Image:\s+busybox:1\.36\n`).MatchString(out) {
		t.Errorf("rollout history --revision=1:\n%s\nwant Image: busybox:1.36", out)
	}
	if r := c.Run(t, "rollout", "history", "deployment/web", "--revision=9"); r.Err == nil {
		t.Errorf("rollout history --revision=9 of a deployment with 2 revisions succeeded: %s", r)
	}
}

func testRolloutUndo(t *testing.T, c *cluster) {
	out := c.OK(t, "rollout", "undo", "deployment/web")
	if want := "deployment.apps/web rolled back"; !strings.Contains(out, want) {
		t.Errorf("rollout undo = %q, want %q", out, want)
	}
	rolloutStatus(t, c, "web")
	sets := waitSettled(t, c, "web", "busybox:1.36", 4, "3")
	if len(sets) != 2 {
		t.Fatalf("%d ReplicaSets after undo, want 2 (the old one reused): %+v", len(sets), sets)
	}
	if s, _ := setWithImage(sets, "busybox:1.36"); s.revision != "3" {
		t.Errorf("ReplicaSet of busybox:1.36 has revision %q after undo, want 3", s.revision)
	}
	if revs := historyRevisions(t, c, "web"); !slices.Equal(revs, []string{"2", "3"}) {
		t.Errorf("rollout history revisions after undo = %q, want [2 3]", revs)
	}
}

func testRolloutPause(t *testing.T, c *cluster) {
	out := c.OK(t, "rollout", "pause", "deployment/web")
	if want := "deployment.apps/web paused"; !strings.Contains(out, want) {
		t.Errorf("rollout pause = %q, want %q", out, want)
	}
	c.OK(t, "set", "image", "deployment/web", "busybox=busybox:1.38")
	// The controller has seen the paused Deployment with the new template
	// once it has observed its generation and says it is paused.
	eventually(t, c, "web", func() error {
		got := jsonpath(t, c, `{.metadata.generation}|{.status.observedGeneration}|{.status.conditions[?(@.type=="Progressing")].reason}`, "deployment", "web")
		f := strings.Split(got, "|")
		if len(f) != 3 || f[0] != f[1] || f[2] != "DeploymentPaused" {
			return fmt.Errorf("deployment generation|observedGeneration|Progressing reason = %q, want equal generations and DeploymentPaused", got)
		}
		return nil
	})
	// Nor does it make one a little later.
	time.Sleep(2 * time.Second)
	sets, err := webSets(t, c, "web")
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := setWithImage(sets, "busybox:1.38"); ok || len(sets) != 2 {
		t.Fatalf("paused deployment: ReplicaSets %+v; want the 2 of before and none with busybox:1.38 (got %+v)", sets, s)
	}
	out = c.OK(t, "rollout", "resume", "deployment/web")
	if want := "deployment.apps/web resumed"; !strings.Contains(out, want) {
		t.Errorf("rollout resume = %q, want %q", out, want)
	}
	rolloutStatus(t, c, "web")
	sets = waitSettled(t, c, "web", "busybox:1.38", 4, "4")
	if len(sets) != 3 {
		t.Errorf("%d ReplicaSets after resume, want 3: %+v", len(sets), sets)
	}
}

func testRolloutDeadline(t *testing.T, c *cluster) {
	c.OK(t, "patch", "deployment", "web", "-p", `{"spec":{"progressDeadlineSeconds":5}}`)
	c.OK(t, "set", "image", "deployment/web", "busybox=busybox:"+brokenImage)
	r := c.RunWith(t, "", rolloutTimeout+30*time.Second, "rollout", "status", "deployment/web", "--timeout=60s")
	var exit *exec.ExitError
	if !errors.As(r.Err, &exit) {
		t.Fatalf("rollout status of a rollout that cannot finish: want a non-zero exit; %s", r)
	}
	if want := `deployment "web" exceeded its progress deadline`; !strings.Contains(r.Stderr, want) {
		t.Fatalf("rollout status stderr does not say %q; %s\n%s", want, r, describeDeployment(t, c, "web"))
	}
	got := jsonpath(t, c, `{.status.conditions[?(@.type=="Progressing")].status}|{.status.conditions[?(@.type=="Progressing")].reason}`, "deployment", "web")
	if got != "False|ProgressDeadlineExceeded" {
		t.Errorf("Progressing condition status|reason = %q, want False|ProgressDeadlineExceeded", got)
	}
	// The old pods that are still available keep serving.
	if avail := jsonpath(t, c, "{.status.availableReplicas}", "deployment", "web"); avail == "" || avail == "0" {
		t.Errorf("deployment availableReplicas = %q during a stuck rollout, want the old pods", avail)
	}
}

// waitNone polls until `kubectl get kind -l app=deploy -o name` lists
// nothing.
func waitNone(t *testing.T, c *cluster, deploy string, kinds ...string) {
	t.Helper()
	for _, kind := range kinds {
		eventually(t, c, deploy, func() error {
			if out := c.OK(t, "get", kind, "-l", "app="+deploy, "-o", "name"); out != "" {
				return fmt.Errorf("%s with app=%s still there: %q", kind, deploy, out)
			}
			return nil
		})
	}
}

func testDeleteBackground(t *testing.T, c *cluster) {
	if n := len(lines(c.OK(t, "get", "rs", "-l", "app=web", "-o", "name"))); n < 2 {
		t.Fatalf("web has %d ReplicaSets before delete, want several", n)
	}
	r := c.RunWith(t, "", rolloutTimeout, "delete", "deployment", "web", "--cascade=background")
	if r.Err != nil || !strings.Contains(r.Stdout, `deployment.apps "web" deleted`) {
		t.Fatalf("delete --cascade=background: %s", r)
	}
	if out := c.Run(t, "get", "deployment", "web"); out.Err == nil {
		t.Errorf("deployment web still there after delete returned: %s", out)
	}
	waitNone(t, c, "web", "rs", "pods")
}

// createReady creates deploy with 2 ready replicas of busybox:1.36.
func createReady(t *testing.T, c *cluster, deploy string) {
	t.Helper()
	c.OK(t, "create", "deployment", deploy, "--image=busybox:1.36", "--replicas=2")
	rolloutStatus(t, c, deploy)
	waitSettled(t, c, deploy, "busybox:1.36", 2, "1")
}

func testDeleteForeground(t *testing.T, c *cluster) {
	createReady(t, c, "fg")
	// A finalizer on one pod holds it, so the foreground deletion has to
	// wait for it, and kubectl can see the Deployment while it waits.
	pod := strings.TrimPrefix(lines(c.OK(t, "get", "pods", "-l", "app=fg", "-o", "name"))[0], "pod/")
	c.OK(t, "patch", "pod", pod, "--type=merge", "-p", `{"metadata":{"finalizers":["cairn.test/hold"]}}`)
	r := c.RunWith(t, "", rolloutTimeout, "delete", "deployment", "fg", "--cascade=foreground", "--wait=false")
	if r.Err != nil || !strings.Contains(r.Stdout, `deployment.apps "fg" deleted`) {
		t.Fatalf("delete --cascade=foreground: %s", r)
	}
	// The Deployment, its ReplicaSet and the held pod wait, marked deleted
	// and with the foregroundDeletion finalizer; the other pod goes.
	eventually(t, c, "fg", func() error {
		d := c.Run(t, "get", "deployment", "fg", "-o", "jsonpath={.metadata.finalizers}|{.metadata.deletionTimestamp}")
		if d.Err != nil {
			return fmt.Errorf("deployment fg gone while a pod it owns through its ReplicaSet is still there: %s", d)
		}
		if !strings.Contains(d.Stdout, "foregroundDeletion") || strings.HasSuffix(d.Stdout, "|") {
			return fmt.Errorf("deployment fg finalizers|deletionTimestamp = %q, want foregroundDeletion and a deletionTimestamp", d.Stdout)
		}
		rs := jsonpath(t, c, `{range .items[*]}{.metadata.finalizers}|{.metadata.deletionTimestamp}{"\n"}{end}`, "rs", "-l", "app=fg")
		if l := lines(rs); len(l) != 1 || !strings.Contains(l[0], "foregroundDeletion") || strings.HasSuffix(l[0], "|") {
			return fmt.Errorf("replicasets of fg finalizers|deletionTimestamp = %q, want one with foregroundDeletion and a deletionTimestamp", rs)
		}
		pods := lines(jsonpath(t, c, `{range .items[*]}{.metadata.name}|{.metadata.deletionTimestamp}{"\n"}{end}`, "pods", "-l", "app=fg"))
		if len(pods) != 1 || !strings.HasPrefix(pods[0], pod+"|") || strings.HasSuffix(pods[0], "|") {
			return fmt.Errorf("pods of fg = %q, want only %s, marked deleted", pods, pod)
		}
		return nil
	})
	c.OK(t, "patch", "pod", pod, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	r = c.RunWith(t, "", rolloutTimeout+30*time.Second, "wait", "--for=delete", "deployment/fg", "--timeout=60s")
	if r.Err != nil {
		t.Fatalf("deployment fg not deleted after its pods: %s\n%s", r, describeDeployment(t, c, "fg"))
	}
	waitNone(t, c, "fg", "rs", "pods")

	// Without anything holding it, kubectl's delete waits for it all.
	createReady(t, c, "fg2")
	r = c.RunWith(t, "", rolloutTimeout+30*time.Second, "delete", "deployment", "fg2", "--cascade=foreground", "--timeout=60s")
	if r.Err != nil || !strings.Contains(r.Stdout, `deployment.apps "fg2" deleted`) {
		t.Fatalf("delete --cascade=foreground: %s", r)
	}
	if out := c.OK(t, "get", "rs,pods", "-l", "app=fg2", "-o", "name"); out != "" {
		t.Errorf("after a foreground delete of deployment fg2 returned, still there:\n%s", out)
	}
}

func testDeleteOrphan(t *testing.T, c *cluster) {
	createReady(t, c, "orphan")
	before := c.OK(t, "get", "rs,pods", "-l", "app=orphan", "-o", "name")
	r := c.RunWith(t, "", rolloutTimeout, "delete", "deployment", "orphan", "--cascade=orphan")
	if r.Err != nil || !strings.Contains(r.Stdout, `deployment.apps "orphan" deleted`) {
		t.Fatalf("delete --cascade=orphan: %s", r)
	}
	if out := c.Run(t, "get", "deployment", "orphan"); out.Err == nil {
		t.Errorf("deployment orphan still there after delete returned: %s", out)
	}
	rsRefs := func() string {
		return jsonpath(t, c, `{range .items[*]}{.metadata.name}|{.metadata.ownerReferences}{"\n"}{end}`, "rs", "-l", "app=orphan")
	}
	eventually(t, c, "orphan", func() error {
		l := lines(rsRefs())
		if len(l) != 1 || !strings.HasSuffix(l[0], "|") {
			return fmt.Errorf("replicasets of orphan name|ownerReferences = %q, want one with no owner", l)
		}
		return nil
	})
	// Give the garbage collector time to do what it must not.
	time.Sleep(3 * time.Second)
	if after := c.OK(t, "get", "rs,pods", "-l", "app=orphan", "-o", "name"); after != before {
		t.Errorf("after an orphaning delete, ReplicaSets and pods\n%s\nwant as before\n%s", after, before)
	}
	rs := strings.TrimSuffix(lines(rsRefs())[0], "|")
	pods := lines(jsonpath(t, c, `{range .items[*]}{.metadata.ownerReferences[*].kind}/{.metadata.ownerReferences[*].name}|{.status.phase}{"\n"}{end}`, "pods", "-l", "app=orphan"))
	if len(pods) != 2 {
		t.Errorf("orphaned pods = %q, want 2", pods)
	}
	for _, p := range pods {
		if p != "ReplicaSet/"+rs+"|Running" {
			t.Errorf("orphaned pod owner|phase = %q, want ReplicaSet/%s|Running", p, rs)
		}
	}
	// The orphaned ReplicaSet still keeps its pods.
	gone := strings.TrimPrefix(lines(c.OK(t, "get", "pods", "-l", "app=orphan", "-o", "name"))[0], "pod/")
	c.OK(t, "delete", "pod", gone)
	eventually(t, c, "orphan", func() error {
		pods := lines(jsonpath(t, c, `{range .items[*]}{.metadata.name}|{.status.phase}{"\n"}{end}`, "pods", "-l", "app=orphan"))
		if len(pods) != 2 || slices.ContainsFunc(pods, func(p string) bool { return strings.HasPrefix(p, gone+"|") || !strings.HasSuffix(p, "|Running") }) {
			return fmt.Errorf("pods of the orphaned replicaset after %s was deleted: %q, want 2 others Running", gone, pods)
		}
		if ready := jsonpath(t, c, "{.status.readyReplicas}", "rs", rs); ready != "2" {
			return fmt.Errorf("orphaned replicaset %s readyReplicas = %q, want 2", rs, ready)
		}
		return nil
	})
	c.OK(t, "delete", "rs", rs)
	waitNone(t, c, "orphan", "rs", "pods")
}
