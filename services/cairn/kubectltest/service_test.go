package kubectltest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/services/proxy"
)

// badPortServiceYAML has a port kube refuses.
const badPortServiceYAML = `apiVersion: v1
kind: Service
metadata:
  name: bad-port
spec:
  ports:
  - port: 70000
    targetPort: 80
`

// testService creates Services with kubectl (create service, expose), lists
// and describes them, reads the kubernetes Service's endpoints, explains
// the Service's fields, and sees a bad Service refused. It runs after
// apply, so the web Deployment exists.
func testService(t *testing.T, c *cluster) {
	if got := strings.TrimSpace(c.OK(t, "create", "service", "clusterip", "api", "--tcp=80:8080")); got != "service/api created" {
		t.Errorf("create service clusterip = %q", got)
	}
	if got := strings.TrimSpace(c.OK(t, "expose", "deployment", "web", "--port=80", "--target-port=8080", "--type=NodePort")); got != "service/web exposed" {
		t.Errorf("expose deployment = %q", got)
	}
	if got := strings.TrimSpace(c.OK(t, "create", "service", "externalname", "db", "--external-name=db.example.com")); got != "service/db created" {
		t.Errorf("create service externalname = %q", got)
	}

	out := c.OK(t, "get", "svc", "-o", "wide")
	rows := wantHeader(t, out, "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR")
	wantRow(t, rows, "kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP")
	wantRow(t, rows, "db", "ExternalName", "<none>", "db.example.com", "<none>")
	for _, re := range []string{
		`(?m)^api\s+ClusterIP\s+10\.(9[6-9]|10[0-9]|11[01])\.\d+\.\d+\s+<none>\s+80/TCP\s+\S+\s+app=api$`,
		`(?m)^web\s+NodePort\s+10\.\d+\.\d+\.\d+\s+<none>\s+80:3\d{4}/TCP\s+\S+\s+app=web$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("get svc -o wide lacks a row matching %s:\n%s", re, out)
		}
	}

	desc := c.OK(t, "describe", "svc", "web")
	for _, w := range []string{"Name:", "web", "Selector:", "app=web", "Type:", "NodePort", "IP Family Policy:", "SingleStack",
		"IP Families:", "IPv4", "Port:", "<unset>  80/TCP", "TargetPort:", "8080/TCP", "NodePort:", "Session Affinity:", "None"} {
		if !strings.Contains(desc, w) {
			t.Errorf("describe svc web lacks %q:\n%s", w, desc)
		}
	}

	// The apiserver advertises the address the node proxies relay to it
	// from (proxy.APIServerAddress), on its own port.
	_, port, _ := strings.Cut(c.Addr, ":")
	rows = wantHeader(t, c.OK(t, "get", "endpoints", "kubernetes"), "NAME", "ENDPOINTS", "AGE")
	wantRow(t, rows, "kubernetes", proxy.APIServerAddress+":"+port)
	rows = wantHeader(t, c.OK(t, "get", "endpointslices", "-l", "kubernetes.io/service-name=kubernetes"), "NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE")
	wantRow(t, rows, "kubernetes", "IPv4", port, proxy.APIServerAddress)

	explain := c.OK(t, "explain", "svc.spec.ports")
	for _, w := range []string{"KIND:       Service", "FIELD: ports <[]ServicePort>", "  nodePort\t<integer>", "  port\t<integer> -required-", "  targetPort\t<IntOrString>"} {
		if !strings.Contains(explain, w) {
			t.Errorf("explain svc.spec.ports lacks %q:\n%s", w, explain)
		}
	}

	r := c.RunWith(t, badPortServiceYAML, 0, "create", "-f", "-")
	if want := `The Service "bad-port" is invalid: spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive`; r.Err == nil || !strings.Contains(r.Stderr, want) {
		t.Errorf("want an error containing %q; %s", want, r)
	}
	r = c.RunWith(t, "", 0, "patch", "svc", "api", "--type=merge", "-p", `{"spec":{"clusterIP":"10.96.0.99","clusterIPs":["10.96.0.99"]}}`)
	if want := `The Service "api" is invalid: spec.clusterIPs[0]: Invalid value: ["10.96.0.99"]: may not change once set`; r.Err == nil || !strings.Contains(r.Stderr, want) {
		t.Errorf("want an error containing %q; %s", want, r)
	}
	if !strings.Contains(c.Fails(t, "get", "svc", "bad-port"), "NotFound") {
		t.Error("the refused service was stored")
	}
	for _, name := range []string{"api", "db"} {
		c.OK(t, "delete", "svc", name)
	}
	testServiceLoadBalancer(t, c)
}
