package e2etest

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// nodeAgent is a DaemonSet of the offline busybox image; a short grace
// period keeps its rolling update fast (sleep ignores SIGTERM as PID 1).
const nodeAgent = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-agent
spec:
  selector:
    matchLabels:
      app: node-agent
  template:
    metadata:
      labels:
        app: node-agent
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: agent
        image: cairn.local/busybox:1.36
        imagePullPolicy: IfNotPresent
        command: ["sleep", "3600"]
        env:
        - name: VERSION
          value: "1"
`

// TestE2EDaemonSet: on the real node of `cairn up`, a DaemonSet's pod is
// placed by the scheduler on the node, runs in containerd, and a template
// change rolls it (`kubectl rollout status`), the new pod running in
// containerd in place of the old one.
func TestE2EDaemonSet(t *testing.T) {
	kubectl := requireNode(t)
	bin := cairntest.Build(t)
	c := startCluster(t, bin, kubectl, t.TempDir(), cairntest.FreeAddr(t))
	cri := c.criClient(t)
	node := strings.TrimSpace(c.OK(t, "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"))

	if got := strings.TrimSpace(c.RunWith(t, nodeAgent, callTimeout, "apply", "-f", "-").Stdout); got != "daemonset.apps/node-agent created" {
		t.Fatalf("apply: %q", got)
	}
	status := func() {
		t.Helper()
		r := c.RunWith(t, "", 3*time.Minute, "rollout", "status", "ds/node-agent", "--timeout=150s")
		if r.Err != nil || !strings.Contains(r.Stdout, `daemon set "node-agent" successfully rolled out`) {
			t.Fatalf("rollout status: %s\n%s", r, c.Run(t, "get", "ds,pods", "-o", "wide").Stdout)
		}
	}
	running := func(version string) corev1.Pod {
		t.Helper()
		var pod corev1.Pod
		poll(t, podWait, "one node-agent pod of VERSION "+version+" on "+node, func() error {
			pods := c.pods(t, "app=node-agent")
			if len(pods) != 1 || pods[0].Spec.NodeName != node || pods[0].DeletionTimestamp != nil ||
				pods[0].Spec.Containers[0].Env[0].Value != version || pods[0].Status.Phase != corev1.PodRunning {
				return errString(c.Run(t, "get", "pods", "-l", "app=node-agent", "-o", "wide").Stdout)
			}
			pod = pods[0]
			return nil
		})
		state := runtimeapi.ContainerState_CONTAINER_RUNNING
		var agents []string
		for _, ct := range criContainers(t, cri, &state) {
			if ct.Labels[labelPodName] == pod.Name {
				agents = append(agents, ct.Metadata.Name)
			}
		}
		if len(agents) != 1 || agents[0] != "agent" {
			t.Errorf("containerd runs %v for pod %s, want its one agent container", agents, pod.Name)
		}
		return pod
	}
	status()
	first := running("1")
	if a := first.Spec.Affinity; a == nil || a.NodeAffinity == nil ||
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != node {
		t.Errorf("the daemon pod's node affinity %+v does not name %s", a, node)
	}

	c.OK(t, "set", "env", "ds/node-agent", "VERSION=2")
	status()
	second := running("2")
	if second.UID == first.UID {
		t.Fatal("the rolling update kept the old pod")
	}
	c.OK(t, "delete", "ds", "node-agent")
	poll(t, podWait, "the daemon pod gone", func() error {
		if out := c.OK(t, "get", "pods", "-l", "app=node-agent", "-o", "name"); out != "" {
			return errString(out)
		}
		return nil
	})
	c.stop(t)
}

type errString string

func (e errString) Error() string { return string(e) }
