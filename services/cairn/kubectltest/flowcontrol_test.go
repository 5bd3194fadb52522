package kubectltest

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// TestPriorityAndFairness: `cairn up`, with API Priority and Fairness on
// by default as kube-apiserver has it, serves kube's mandatory and suggested FlowSchemas and
// PriorityLevelConfigurations to kubectl and classifies requests (kube's
// X-Kubernetes-PF-FlowSchema-UID response header); a concurrency limit
// APF cannot share out is refused in one line before anything starts.
func TestPriorityAndFairness(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cairn and runs cairn up; skipped with -short")
	}
	kubectl := cairntest.KubectlPath(t)
	bin := cairntest.Build(t)
	dir := t.TempDir()

	bad := filepath.Join(dir, "bad")
	r := cairntest.Run(t, time.Minute, bin, "up", "--node=false", "--data-dir", bad, "--enable-priority-and-fairness",
		"--max-requests-inflight", "0", "--max-mutating-requests-inflight", "0")
	if r.Err == nil || !strings.Contains(r.Stderr, "--max-requests-inflight 0") || strings.Count(strings.TrimSpace(r.Stderr), "\n") > 0 {
		t.Errorf("cairn up with a concurrency limit of 0: want one line naming the flags, got %v:\n%s", r.Err, r.Stderr)
	}
	if entries, _ := filepath.Glob(filepath.Join(bad, "*")); len(entries) > 0 {
		t.Errorf("refused cairn up left %v", entries)
	}

	c := startCluster(t, t, bin, kubectl, filepath.Join(dir, "data"), cairntest.FreeAddr(t), filepath.Join(dir, "home"))
	fs := c.OK(t, "get", "flowschemas", "-o", "name")
	for _, want := range []string{"exempt", "probes", "system-leader-election", "system-nodes", "kube-controller-manager",
		"service-accounts", "global-default", "catch-all"} {
		if !strings.Contains(fs, "flowschema.flowcontrol.apiserver.k8s.io/"+want+"\n") {
			t.Errorf("no FlowSchema %s:\n%s", want, fs)
		}
	}
	pls := c.OK(t, "get", "prioritylevelconfigurations", "-o", "name")
	for _, want := range []string{"exempt", "system", "node-high", "leader-election", "workload-high", "workload-low", "global-default", "catch-all"} {
		if !strings.Contains(pls, "prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/"+want+"\n") {
			t.Errorf("no PriorityLevelConfiguration %s:\n%s", want, pls)
		}
	}
	// kubectl -v=8 prints the response headers: the admin (system:masters)
	// is classified by the exempt FlowSchema.
	r = c.Run(t, "get", "namespaces", "-v=8")
	if r.Err != nil || !strings.Contains(strings.ToLower(r.Stderr), "x-kubernetes-pf-flowschema-uid") {
		t.Errorf("kubectl get namespaces: no X-Kubernetes-PF-FlowSchema-UID response header (%v):\n%s", r.Err, cairntest.Tail(r.Stderr, 40))
	}
}
