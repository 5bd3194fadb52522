package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/projections/history/web"
	"github.com/cairn-dev/cairn/services/cairn/clustertest"
)

const chromium = "/usr/bin/chromium"

func waitReady(t *testing.T, c *clustertest.Cluster, n int32) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		d, err := c.Alice.AppsV1().Deployments("default").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Status.ObservedGeneration >= d.Generation && d.Status.ReadyReplicas == n && d.Status.Replicas == n {
			return
		}
	}
	t.Fatalf("deployment not ready with %d replicas", n)
}

// count evaluates the number of elements matching a selector.
func count(sel string) chromedp.Action[int] {
	return chromedp.Evaluate[int](`document.querySelectorAll(` + mustJSON(sel) + `).length`)
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// waitCount polls until at least want elements match sel.
func waitCount(ctx context.Context, t *testing.T, sel string, want int) int {
	t.Helper()
	var n int
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var err error
		if n, err = chromedp.Run(ctx, count(sel)); err != nil {
			t.Fatal(err)
		}
		if n >= want {
			return n
		}
	}
	t.Fatalf("%s: %d elements, want >= %d", sel, n, want)
	return n
}

// TestTimelinePage drives Debian's chromium: the page shows the rows and
// marks of a real rollout, then a scale adds a row and marks without a
// reload; a screenshot is saved as an artifact.
func TestTimelinePage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a control plane and chromium; skipped with -short")
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("chromium not installed (apt-get install -y chromium)")
	}
	c := clustertest.StartCluster(t)
	if _, err := c.Alice.AppsV1().Deployments("default").Create(t.Context(), clustertest.Deployment("web", 5, "busybox:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, 5)
	mux := http.NewServeMux()
	mux.Handle("/history/", web.Handler(c.Store, "/history/"))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/history/?kind=deployments&namespace=default&name=web")); err != nil {
		t.Fatal(err)
	}
	// Deployment, one ReplicaSet, 5 pods; each pod at least created,
	// scheduled and started.
	rows := waitCount(ctx, t, "g.row", 7)
	marks := waitCount(ctx, t, "circle.mark[data-class=start]", 5)
	t.Logf("page: %d rows, %d start marks", rows, marks)
	for _, class := range []string{"create", "schedule", "start"} {
		waitCount(ctx, t, "circle.mark[data-class="+class+"]", 5)
	}
	waitCount(ctx, t, "path.arrow", 10)

	// A new event: scale to 6. The page updates live.
	d, err := c.Alice.AppsV1().Deployments("default").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	six := int32(6)
	d.Spec.Replicas = &six
	if _, err := c.Alice.AppsV1().Deployments("default").Update(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCount(ctx, t, "circle.mark[data-class=scale]", 1)
	waitCount(ctx, t, "g.row", 8)
	waitCount(ctx, t, "circle.mark[data-class=start]", 6)

	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("CAIRN_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "cairn-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "history-timeline.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}
