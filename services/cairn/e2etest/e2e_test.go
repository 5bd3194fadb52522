package e2etest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
)

const (
	// Label keys the kubelet puts on sandboxes and containers, as the real
	// kubelet names them; the test reads them straight from containerd.
	labelPodName      = "io.kubernetes.pod.name"
	labelPodNamespace = "io.kubernetes.pod.namespace"
	labelContainer    = "io.kubernetes.container.name"

	webYAML = "../../../ops/examples/web.yaml"
	podWait = 2 * time.Minute
)

// crashPod exits a second after it starts, for ever.
const crashPod = `apiVersion: v1
kind: Pod
metadata:
  name: crash
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: crash
    image: cairn.local/busybox:1.36
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 1; exit 1"]
`

// tickerPod writes a numbered line every half second, for kubectl attach.
const tickerPod = `apiVersion: v1
kind: Pod
metadata:
  name: ticker
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: tick
    image: cairn.local/busybox:1.36
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.5; done"]
`

// TestE2E is issue 5's end-to-end check through the README's command path:
// `cairn up` with its real node, then kubectl only, with containerd's CRI
// read directly to see what really runs.
func TestE2E(t *testing.T) {
	kubectl := requireNode(t)
	bin := cairntest.Build(t)
	dataDir := t.TempDir()
	begin := time.Now()
	c := startCluster(t, bin, kubectl, dataDir, cairntest.FreeAddr(t))
	t.Logf("cairn up with its node Ready after %v", time.Since(begin).Round(time.Millisecond))
	cri := c.criClient(t)
	containerdPid := c.containerdPid(t)
	netns := c.netnsPath()
	if _, err := os.Stat(netns); err != nil {
		t.Fatalf("node network namespace: %v", err)
	}

	// The crash loop first, so that its back-off runs while the rest is
	// checked.
	crashFile := filepath.Join(t.TempDir(), "crash.yaml")
	if err := os.WriteFile(crashFile, []byte(crashPod), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", crashFile)
	talkFile := filepath.Join(t.TempDir(), "talk.yaml")
	if err := os.WriteFile(talkFile, []byte(talkPod), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", talkFile)
	tickerFile := filepath.Join(t.TempDir(), "ticker.yaml")
	if err := os.WriteFile(tickerFile, []byte(tickerPod), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", tickerFile)

	// The README's first example, as written.
	c.OK(t, "apply", "-f", webYAML)
	// busybox httpd (PID 1) ignores SIGTERM, so web.yaml's pods take the
	// default 30 s grace period to go; a short one keeps the test fast.
	// This rolls the Deployment once.
	c.OK(t, "patch", "deployment", "web", "--type=merge", "-p", `{"spec":{"template":{"spec":{"terminationGracePeriodSeconds":2}}}}`)

	var web []corev1.Pod
	t.Run("3 Ready with IPs, 3 containers in containerd", func(t *testing.T) {
		web = c.waitWeb(t, 3)
		checkCRIRunning(t, cri, web)
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("kubectl describe shows the rollout's events", func(t *testing.T) { c.checkDescribeEvents(t, web[0].Name) })

	t.Run("pod to pod by IP, logs", func(t *testing.T) {
		from, to := web[0], web[1]
		page := c.OK(t, "exec", from.Name, "--", "wget", "-q", "-O", "-", "http://"+to.Status.PodIP+":8080/")
		if strings.TrimSpace(page) == "" {
			t.Fatalf("%s fetched an empty page from %s (%s)", from.Name, to.Name, to.Status.PodIP)
		}
		want := c.OK(t, "exec", to.Name, "--", "cat", "/var/www/index.html")
		if page != want {
			t.Errorf("page fetched by IP = %q, want %s's /var/www/index.html %q", page, to.Name, want)
		}
		// httpd -v logs every request with the client's address: the
		// fetch shows in the target's log, from the source pod's IP.
		poll(t, 10*time.Second, "kubectl logs "+to.Name+" shows the request from "+from.Status.PodIP, func() error {
			logs := c.OK(t, "logs", to.Name)
			// "[::ffff:10.64.0.8]:35338: response:200" or "10.64.0.8:35338: ..."
			ip := from.Status.PodIP
			if !strings.Contains(logs, "["+ip+"]:") && !strings.Contains(logs, ":"+ip+"]:") && !strings.Contains(logs, "\n"+ip+":") && !strings.HasPrefix(logs, ip+":") {
				return fmt.Errorf("logs:\n%s", cairntest.Tail(logs, 10))
			}
			return nil
		})
	})

	t.Run("exec hostname", func(t *testing.T) {
		for _, p := range web {
			got := strings.TrimSpace(c.OK(t, "exec", p.Name, "--", "cat", "/etc/hostname"))
			if got != p.Name {
				t.Errorf("kubectl exec %s -- cat /etc/hostname = %q, want the pod name", p.Name, got)
			}
		}
	})

	t.Run("port-forward", func(t *testing.T) { c.checkPortForward(t, web[0].Name) })

	t.Run("attach", func(t *testing.T) { c.checkAttach(t) })

	t.Run("logs -c, --previous and -f of a two-container pod", func(t *testing.T) { c.checkLogsOptions(t) })

	t.Run("the kubelet API refuses all but system:masters", func(t *testing.T) { c.checkKubeletAuth(t) })

	t.Run("scale to 5 and back to 1", func(t *testing.T) {
		c.OK(t, "scale", "deployment", "web", "--replicas=5")
		five := c.waitWeb(t, 5)
		checkCRIRunning(t, cri, five)
		c.OK(t, "scale", "deployment", "web", "--replicas=1")
		one := c.waitWeb(t, 1)
		var gone []string
		for _, p := range five {
			if p.Name != one[0].Name {
				gone = append(gone, p.Name)
			}
		}
		if len(gone) != 4 {
			t.Fatalf("the one pod left %s is not one of the five %v", one[0].Name, podNames(five))
		}
		poll(t, podWait, "containers of the 4 scaled-down pods gone from the CRI", func() error {
			left := criContainers(t, cri, nil)
			var still []string
			for _, ct := range left {
				if slices.Contains(gone, ct.Labels[labelPodName]) {
					still = append(still, ct.Labels[labelPodName]+"/"+ct.Metadata.Name+" "+ct.State.String())
				}
			}
			if len(still) > 0 {
				return fmt.Errorf("still in containerd: %v", still)
			}
			return nil
		})
		checkCRIRunning(t, cri, one)
	})

	t.Run("crash loop back-off", func(t *testing.T) {
		var last string
		poll(t, podWait, "pod crash restarted at least twice and shown in CrashLoopBackOff", func() error {
			var p corev1.Pod
			if err := json.Unmarshal([]byte(c.OK(t, "get", "pod", "crash", "-o", "json")), &p); err != nil {
				return err
			}
			if len(p.Status.ContainerStatuses) != 1 {
				return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
			}
			cs := p.Status.ContainerStatuses[0]
			table := c.OK(t, "get", "pods", "crash", "--no-headers")
			last = fmt.Sprintf("restartCount %d, state %+v, lastState %+v; kubectl get pods: %s", cs.RestartCount, cs.State, cs.LastTerminationState, table)
			if cs.RestartCount < 2 {
				return errors.New(last)
			}
			if w := cs.State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" || !strings.Contains(table, "CrashLoopBackOff") {
				return errors.New(last)
			}
			if t := cs.LastTerminationState.Terminated; t == nil || t.ExitCode != 1 || t.Reason != "Error" {
				return errors.New(last)
			}
			return nil
		})
		t.Log(last)
		c.describeShows(t, "pod", "crash", `Warning\s+BackOff\s+.*kubelet\s+Back-off restarting failed container crash in pod crash_default\(`)
	})

	t.Run("delete removes containers, sandboxes, network namespaces", func(t *testing.T) {
		sandboxes := criSandboxes(t, cri)
		if len(sandboxes) == 0 {
			t.Fatal("no sandboxes in containerd before delete")
		}
		var paths []string
		for _, sb := range sandboxes {
			if p := sandboxNetNS(t, cri, sb.Id); p != "" {
				paths = append(paths, p)
			}
		}
		if len(paths) == 0 {
			t.Fatal("no pod network namespace found through the CRI")
		}
		t.Logf("%d sandboxes before delete; pod network namespaces %v", len(sandboxes), paths)
		c.OK(t, "delete", "-f", webYAML, "--grace-period=2")
		c.OK(t, "delete", "pod", "crash", "talk", "ticker", "--grace-period=1")
		poll(t, podWait, "no pods left", func() error {
			if ps := c.pods(t, ""); len(ps) > 0 {
				return fmt.Errorf("pods %v", podNames(ps))
			}
			return nil
		})
		poll(t, 30*time.Second, "CRI lists no container and no sandbox of the default namespace", func() error {
			cts, sbs := criContainers(t, cri, nil), criSandboxes(t, cri)
			if len(cts)+len(sbs) > 0 {
				var s []string
				for _, ct := range cts {
					s = append(s, "container "+ct.Labels[labelPodName]+"/"+ct.Metadata.Name)
				}
				for _, sb := range sbs {
					s = append(s, "sandbox "+sb.Metadata.Name)
				}
				return fmt.Errorf("left: %v", s)
			}
			return nil
		})
		for _, p := range paths {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pod network namespace %s still there (stat: %v)", p, err)
			}
		}
		dirs := map[string]bool{}
		for _, p := range paths {
			dirs[filepath.Dir(p)] = true
		}
		for d := range dirs {
			if !strings.HasPrefix(d, c.nodeDir()) {
				t.Errorf("pod network namespace directory %s is not under the node's directory %s", d, c.nodeDir())
			}
			if es, _ := os.ReadDir(d); len(es) > 0 {
				var names []string
				for _, e := range es {
					names = append(names, e.Name())
				}
				t.Errorf("network namespaces left in %s: %v", d, names)
			}
		}
	})

	t.Run("SIGINT leaves no containerd and no netns", func(t *testing.T) {
		if !processAlive(containerdPid) {
			t.Fatalf("containerd %d not running before stop", containerdPid)
		}
		c.stop(t)
		if processAlive(containerdPid) {
			t.Errorf("containerd %d still running after cairn up exited", containerdPid)
		}
		if _, err := os.Stat(netns); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("node network namespace %s still there (stat: %v)", netns, err)
		}
		if _, err := os.Stat(c.socket()); !errors.Is(err, os.ErrNotExist) && filepath.Dir(c.socket()) != c.nodeDir() {
			t.Errorf("containerd socket %s still there (stat: %v)", c.socket(), err)
		}
	})
	t.Logf("whole test %v", time.Since(begin).Round(time.Millisecond))
}

// waitWeb waits until exactly n web pods not being deleted are Ready with
// an IP, and returns them.
func (c *cluster) waitWeb(t *testing.T, n int) []corev1.Pod {
	t.Helper()
	var live []corev1.Pod
	poll(t, podWait, fmt.Sprintf("%d web pods Ready with IPs", n), func() error {
		live = live[:0]
		var notReady []string
		for _, p := range c.pods(t, "app=web") {
			if p.DeletionTimestamp != nil {
				continue
			}
			if g := p.Spec.TerminationGracePeriodSeconds; g == nil || *g != 2 {
				continue // the first ReplicaSet's, being rolled away
			}
			live = append(live, p)
			if !podReady(&p) || p.Status.PodIP == "" {
				notReady = append(notReady, fmt.Sprintf("%s phase=%s ip=%q", p.Name, p.Status.Phase, p.Status.PodIP))
			}
		}
		if len(live) != n || len(notReady) > 0 {
			return fmt.Errorf("%d live web pods %v, not ready: %v", len(live), podNames(live), notReady)
		}
		return nil
	})
	return live
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podNames(ps []corev1.Pod) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Name)
	}
	return s
}

func criCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// criContainers lists the containers of the default namespace straight from
// containerd, filtered by state when state is not nil.
func criContainers(t testing.TB, cri runtimeapi.RuntimeServiceClient, state *runtimeapi.ContainerState) []*runtimeapi.Container {
	t.Helper()
	f := &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelPodNamespace: "default"}}
	if state != nil {
		f.State = &runtimeapi.ContainerStateValue{State: *state}
	}
	r, err := cri.ListContainers(criCtx(t), &runtimeapi.ListContainersRequest{Filter: f})
	if err != nil {
		t.Fatalf("CRI ListContainers: %v", err)
	}
	return r.Containers
}

// criSandboxes lists the pod sandboxes of the default namespace.
func criSandboxes(t testing.TB, cri runtimeapi.RuntimeServiceClient) []*runtimeapi.PodSandbox {
	t.Helper()
	r, err := cri.ListPodSandbox(criCtx(t), &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{labelPodNamespace: "default"}}})
	if err != nil {
		t.Fatalf("CRI ListPodSandbox: %v", err)
	}
	return r.Items
}

// checkCRIRunning requires exactly one running httpd container in
// containerd for each pod, in a ready sandbox.
func checkCRIRunning(t *testing.T, cri runtimeapi.RuntimeServiceClient, pods []corev1.Pod) {
	t.Helper()
	running := runtimeapi.ContainerState_CONTAINER_RUNNING
	byPod := map[string][]*runtimeapi.Container{}
	for _, ct := range criContainers(t, cri, &running) {
		byPod[ct.Labels[labelPodName]] = append(byPod[ct.Labels[labelPodName]], ct)
	}
	readySandboxes := map[string]bool{}
	for _, sb := range criSandboxes(t, cri) {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			readySandboxes[sb.Id] = true
		}
	}
	for _, p := range pods {
		cts := byPod[p.Name]
		if len(cts) != 1 || cts[0].Labels[labelContainer] != "httpd" || !readySandboxes[cts[0].PodSandboxId] {
			t.Errorf("pod %s: want one running httpd container in a ready sandbox in containerd, got %v", p.Name, cts)
		}
	}
	t.Logf("containerd runs %d httpd containers for pods %v", len(pods), podNames(pods))
}

// sandboxNetNS is the network namespace path of a sandbox; "" once it is
// stopped.
func sandboxNetNS(t testing.TB, cri runtimeapi.RuntimeServiceClient, id string) string {
	t.Helper()
	path, err := nodetest.SandboxNetNS(criCtx(t), cri, id)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// checkDescribeEvents checks, through kubectl describe, the Events that
// each component records for a Deployment's rollout, as Kubernetes'
// components record them: the deployment controller's ScalingReplicaSet,
// the ReplicaSet controller's SuccessfulCreate, the scheduler's Scheduled
// and the kubelet's Pulled, Created and Started on the pod.
// checkPortForward: kubectl port-forward (websocket first, then SPDY, as
// kubectl tries them) to the pod's httpd serves its page on a loopback
// port of this machine, for two connections in turn.
func (c *cluster) checkPortForward(t *testing.T, pod string) {
	out, stop := c.Background(t, "port-forward", "--address", "127.0.0.1", "pod/"+pod, ":8080")
	defer stop()
	forwarding := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)
	var port string
	poll(t, 30*time.Second, "kubectl port-forward to report its port", func() error {
		m := forwarding.FindStringSubmatch(out.String())
		if m == nil {
			return fmt.Errorf("stdout: %q", out.String())
		}
		port = m[1]
		return nil
	})
	want := c.OK(t, "exec", pod, "--", "cat", "/var/www/index.html")
	for range 2 {
		resp, err := http.Get("http://127.0.0.1:" + port + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != want {
			t.Errorf("through kubectl port-forward: %d %q, want 200 %q", resp.StatusCode, b, want)
		}
	}
	if n := strings.Count(out.String(), "Handling connection for "+port); n != 2 {
		t.Errorf("kubectl port-forward reported %d connections, want 2: %q", n, out.String())
	}
}

// checkAttach: kubectl attach streams what the ticker's main process
// writes from the moment it attached: later lines than the log already
// held.
func (c *cluster) checkAttach(t *testing.T) {
	poll(t, podWait, "pod ticker Running", func() error {
		if phase := c.OK(t, "get", "pod", "ticker", "-o", "jsonpath={.status.phase}"); phase != "Running" {
			return fmt.Errorf("phase %q", phase)
		}
		return nil
	})
	before := strings.Count(c.OK(t, "logs", "ticker"), "\n")
	out, stop := c.Background(t, "attach", "ticker")
	defer stop()
	tick := regexp.MustCompile(`(?m)^tick (\d+)$`)
	poll(t, 30*time.Second, "kubectl attach to stream a tick written after it attached", func() error {
		for _, m := range tick.FindAllStringSubmatch(out.String(), -1) {
			if n, _ := strconv.Atoi(m[1]); n > before {
				return nil
			}
		}
		return fmt.Errorf("stdout %q (the log had %d lines)", out.String(), before)
	})
}

func (c *cluster) checkDescribeEvents(t *testing.T, pod string) {
	c.describeShows(t, "deployment", "web", `Normal\s+ScalingReplicaSet\s+.*deployment-controller\s+Scaled up replica set web-[a-z0-9]+ from 0 to 3`)
	rs := strings.TrimSpace(c.OK(t, "get", "pod", pod, "-o", "jsonpath={.metadata.ownerReferences[0].name}"))
	c.describeShows(t, "replicaset", rs, `Normal\s+SuccessfulCreate\s+.*replicaset-controller\s+Created pod: web-`)
	c.describeShows(t, "pod", pod,
		`Normal\s+Scheduled\s+.*default-scheduler\s+Successfully assigned default/`+pod+` to `,
		`Normal\s+Pulled\s+.*kubelet\s+Container image "cairn.local/busybox:1.36" already present on machine`,
		`Normal\s+Created\s+.*kubelet\s+Created container: httpd`,
		`Normal\s+Started\s+.*kubelet\s+Started container httpd`)
}

// describeShows polls kubectl describe kind/name until its output matches
// every pattern: Events are written asynchronously.
func (c *cluster) describeShows(t *testing.T, kind, name string, patterns ...string) {
	t.Helper()
	poll(t, 30*time.Second, fmt.Sprintf("kubectl describe %s %s to list %q", kind, name, patterns), func() error {
		out := c.OK(t, "describe", kind, name)
		for _, p := range patterns {
			if !regexp.MustCompile(p).MatchString(out) {
				return fmt.Errorf("no match for %s in:\n%s", p, cairntest.Tail(out, 15))
			}
		}
		return nil
	})
}
