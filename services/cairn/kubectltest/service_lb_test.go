package kubectltest

import (
	"regexp"
	"strings"
	"testing"
)

// testServiceLoadBalancer: kubectl create service loadbalancer on a
// cluster with no load-balancer controller prints EXTERNAL-IP <pending>
// and the allocated node port, as kube does; once someone writes
// status.loadBalancer through the status subresource, get and describe
// show the ingress point; a RequireDualStack Service is refused with
// kube's message on this single-stack cluster.
func testServiceLoadBalancer(t *testing.T, c *cluster) {
	if got := strings.TrimSpace(c.OK(t, "create", "service", "loadbalancer", "lb", "--tcp=80:8080")); got != "service/lb created" {
		t.Errorf("create service loadbalancer = %q", got)
	}
	defer c.OK(t, "delete", "svc", "lb")
	out := c.OK(t, "get", "svc", "lb")
	wantHeader(t, out, "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE")
	pending := regexp.MustCompile(`(?m)^lb\s+LoadBalancer\s+10\.\d+\.\d+\.\d+\s+<pending>\s+80:3\d{4}/TCP\s+\S+$`)
	if !pending.MatchString(out) {
		t.Errorf("get svc lb: want EXTERNAL-IP <pending> and a node port:\n%s", out)
	}
	c.OK(t, "patch", "svc", "lb", "--subresource=status", "--type=merge", "-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.50"}]}}}`)
	out = c.OK(t, "get", "svc", "lb", "-o", "wide")
	wantHeader(t, out, "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR")
	if !regexp.MustCompile(`(?m)^lb\s+LoadBalancer\s+10\.\d+\.\d+\.\d+\s+192\.0\.2\.50\s+80:3\d{4}/TCP\s+\S+\s+app=lb$`).MatchString(out) {
		t.Errorf("get svc lb -o wide after the status write:\n%s", out)
	}
	desc := c.OK(t, "describe", "svc", "lb")
	for _, w := range []string{"Type:", "LoadBalancer", "LoadBalancer Ingress:", "192.0.2.50 (VIP)", "NodePort:", "External Traffic Policy:", "Cluster"} {
		if !strings.Contains(desc, w) {
			t.Errorf("describe svc lb lacks %q:\n%s", w, desc)
		}
	}
	// The spec's own endpoint does not take status.
	c.OK(t, "patch", "svc", "lb", "--type=merge", "-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.60"}]}}}`)
	if got := c.OK(t, "get", "svc", "lb", "-o", "jsonpath={.status.loadBalancer.ingress[*].ip}"); got != "192.0.2.50" {
		t.Errorf("status after a patch of the spec: %q, want 192.0.2.50", got)
	}

	r := c.RunWith(t, requireDualStackYAML, 0, "create", "-f", "-")
	if want := `The Service "dual" is invalid: spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for dual-stack services`; r.Err == nil || !strings.Contains(r.Stderr, want) {
		t.Errorf("want an error containing %q; %s", want, r)
	}
}

const requireDualStackYAML = `apiVersion: v1
kind: Service
metadata:
  name: dual
spec:
  ipFamilyPolicy: RequireDualStack
  selector:
    app: dual
  ports:
  - port: 80
`
