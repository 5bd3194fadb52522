package e2etest

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkPortForwardService: kubectl port-forward svc/NAME resolves the
// Service to one of its pods (kubectl reads the Service, lists the pods of
// its selector, maps the Service port to the pod's target port) and
// forwards a loopback port of this machine to that pod through
// pods/portforward; the page comes from one of the Service's pods, the
// same one for both connections.
func (c *cluster) checkPortForwardService(t *testing.T, svc string, servicePort, targetPort int, pods []string) {
	out, stop := c.Background(t, "port-forward", "--address", "127.0.0.1", "svc/"+svc, fmt.Sprintf(":%d", servicePort))
	defer stop()
	forwarding := regexp.MustCompile(fmt.Sprintf(`Forwarding from 127\.0\.0\.1:(\d+) -> %d`, targetPort))
	var port string
	poll(t, 30*time.Second, "kubectl port-forward svc/"+svc+" to report its port", func() error {
		m := forwarding.FindStringSubmatch(out.String())
		if m == nil {
			return fmt.Errorf("stdout: %q", out.String())
		}
		port = m[1]
		return nil
	})
	var answers []string
	for range 2 {
		resp, err := http.Get("http://127.0.0.1:" + port + "/who")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		who := strings.TrimSpace(string(b))
		if resp.StatusCode != http.StatusOK || !slices.Contains(pods, who) {
			t.Errorf("through kubectl port-forward svc/%s: %d %q, want 200 and one of %v", svc, resp.StatusCode, b, pods)
		}
		answers = append(answers, who)
	}
	if answers[0] != answers[1] {
		t.Errorf("port-forward answered from %v: one pod expected", answers)
	}
	if n := strings.Count(out.String(), "Handling connection for "+port); n != 2 {
		t.Errorf("kubectl port-forward reported %d connections, want 2: %q", n, out.String())
	}
}
