package e2etest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/kubelet/dns"
)

// dnsPods are pods made after the Service web exists, so that their
// containers get its variables: ClusterFirst with a hostname, subdomain
// and hostAliases; Default; None with a dnsConfig; service links off.
const dnsPods = `apiVersion: v1
kind: Pod
metadata:
  name: client
spec:
  hostname: client
  subdomain: sub
  hostAliases:
  - ip: 192.0.2.7
    hostnames: [foo.local, bar.local]
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: cairn.local/busybox:1.36
    command: ["sleep", "3600"]
---
apiVersion: v1
kind: Pod
metadata:
  name: hostdns
spec:
  dnsPolicy: Default
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: cairn.local/busybox:1.36
    command: ["sleep", "3600"]
---
apiVersion: v1
kind: Pod
metadata:
  name: nodns
spec:
  dnsPolicy: None
  dnsConfig:
    nameservers: [192.0.2.53]
    searches: [my.domain]
    options:
    - name: ndots
      value: "2"
    - name: edns0
  enableServiceLinks: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: cairn.local/busybox:1.36
    command: ["sleep", "3600"]
`

// TestClusterDNS runs `cairn up` with its cluster DNS on the real node:
// kube-dns, the coredns ConfigMap and Deployment exist as kubeadm's, the
// CoreDNS pods run the image cairn.local/coredns (the cairn binary), and
// each pod's /etc/resolv.conf, /etc/hosts and Service variables are as the
// kubelet writes them. The lookup of web.default.svc.cluster.local (and of
// a StatefulSet pod by its stable name, see statefulSetDNS) from a
// pod needs the node's proxy (10.96.0.10 and the apiserver at 10.96.0.1
// are Service addresses): that part runs once the node programs the
// proxy's nftables table, and skips until then.
func TestClusterDNS(t *testing.T) {
	kubectl := requireNode(t)
	bin := cairntest.Build(t)
	c := startClusterWith(t, kubectl, cairntest.UpConfig{Bin: bin, DataDir: t.TempDir(), Addr: cairntest.FreeAddr(t),
		StopTimeout: stopTimeout, ClusterDNS: true})

	t.Run("kube-dns, ConfigMap and Deployment as kubeadm's", func(t *testing.T) {
		var svc corev1.Service
		getJSON(t, c, &svc, "-n", "kube-system", "get", "service", "kube-dns")
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%s %d/%s", p.Name, p.Port, p.Protocol))
		}
		if svc.Spec.ClusterIP != "10.96.0.10" || !slices.Equal(ports, []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 9153/TCP"}) ||
			svc.Spec.Selector["k8s-app"] != "kube-dns" {
			t.Errorf("kube-dns: clusterIP %s ports %v selector %v", svc.Spec.ClusterIP, ports, svc.Spec.Selector)
		}
		cf := c.OK(t, "-n", "kube-system", "get", "configmap", "coredns", "-o", "jsonpath={.data.Corefile}")
		for _, want := range []string{"kubernetes cluster.local in-addr.arpa ip6.arpa", "health :8080", "ready :8181", "prometheus :9153"} {
			if !strings.Contains(cf, want) {
				t.Errorf("Corefile lacks %q:\n%s", want, cf)
			}
		}
		if strings.Contains(cf, "forward") {
			t.Errorf("the default Corefile forwards outside the cluster:\n%s", cf)
		}
		var d appsv1.Deployment
		getJSON(t, c, &d, "-n", "kube-system", "get", "deployment", "coredns")
		if img := d.Spec.Template.Spec.Containers[0].Image; img != images.CoreDNSRef || d.Spec.Template.Labels["k8s-app"] != "kube-dns" {
			t.Errorf("coredns Deployment: image %s labels %v", img, d.Spec.Template.Labels)
		}
	})

	t.Run("CoreDNS pods run the cairn.local/coredns image", func(t *testing.T) {
		poll(t, readyTimeout, "coredns pods running", func() error {
			var l corev1.PodList
			getJSON(t, c, &l, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-dns")
			running := 0
			for _, p := range l.Items {
				for _, s := range p.Status.ContainerStatuses {
					if s.State.Running != nil {
						running++
					}
				}
			}
			if running < 2 {
				return fmt.Errorf("%d of %d coredns containers running", running, len(l.Items))
			}
			return nil
		})
	})

	c.OK(t, "apply", "-f", webYAML)
	c.OK(t, "expose", "deployment", "web", "--port", "80", "--target-port", "8080")
	webIP := strings.TrimSpace(c.OK(t, "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"))
	podsFile := filepath.Join(t.TempDir(), "dns-pods.yaml")
	if err := os.WriteFile(podsFile, []byte(dnsPods), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", podsFile)
	c.OK(t, "wait", "--for=condition=Ready", "pod/client", "pod/hostdns", "pod/nodns", "--timeout=180s")
	host, err := os.Open("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	hostConf, err := dns.ParseResolvConf(host)
	host.Close()
	if err != nil {
		t.Fatal(err)
	}

	resolv := func(t *testing.T, pod string) dns.Config {
		t.Helper()
		got, err := dns.ParseResolvConf(strings.NewReader(c.OK(t, "exec", pod, "--", "cat", "/etc/resolv.conf")))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	t.Run("resolv.conf by dnsPolicy", func(t *testing.T) {
		want := dns.Config{Servers: []string{"10.96.0.10"},
			Searches: append([]string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}, hostConf.Searches...),
			Options:  []string{"ndots:5"}}
		if got := resolv(t, "client"); !sameConfig(got, want) {
			t.Errorf("ClusterFirst: %+v, want %+v", got, want)
		}
		if got := resolv(t, "hostdns"); !slices.Equal(got.Servers, hostConf.Servers) || !slices.Equal(got.Searches, hostConf.Searches) {
			t.Errorf("Default: %+v, want the node's %+v", got, hostConf)
		}
		want = dns.Config{Servers: []string{"192.0.2.53"}, Searches: []string{"my.domain"}, Options: []string{"ndots:2", "edns0"}}
		if got := resolv(t, "nodns"); !sameConfig(got, want) {
			t.Errorf("None: %+v, want %+v", got, want)
		}
	})

	t.Run("hosts file and hostname", func(t *testing.T) {
		hosts := c.OK(t, "exec", "client", "--", "cat", "/etc/hosts")
		ip := strings.TrimSpace(c.OK(t, "get", "pod", "client", "-o", "jsonpath={.status.podIP}"))
		for _, want := range []string{"# Kubernetes-managed hosts file.\n", "127.0.0.1\tlocalhost\n",
			ip + "\tclient.sub.default.svc.cluster.local\tclient\n", "# Entries added by HostAliases.\n192.0.2.7\tfoo.local\tbar.local\n"} {
			if !strings.Contains(hosts, want) {
				t.Errorf("/etc/hosts lacks %q:\n%s", want, hosts)
			}
		}
		if h := strings.TrimSpace(c.OK(t, "exec", "client", "--", "hostname")); h != "client" {
			t.Errorf("hostname %q", h)
		}
	})

	t.Run("Service environment variables", func(t *testing.T) {
		env := envOf(c.OK(t, "exec", "client", "--", "env"))
		kubeIP := strings.TrimSpace(c.OK(t, "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}"))
		for k, v := range map[string]string{
			"WEB_SERVICE_HOST": webIP, "WEB_SERVICE_PORT": "80", "WEB_PORT": "tcp://" + webIP + ":80",
			"WEB_PORT_80_TCP": "tcp://" + webIP + ":80", "WEB_PORT_80_TCP_PROTO": "tcp", "WEB_PORT_80_TCP_PORT": "80",
			"WEB_PORT_80_TCP_ADDR": webIP, "KUBERNETES_SERVICE_HOST": kubeIP, "KUBERNETES_SERVICE_PORT": "443",
			"KUBERNETES_SERVICE_PORT_HTTPS": "443", "KUBERNETES_PORT": "tcp://" + kubeIP + ":443",
		} {
			if env[k] != v {
				t.Errorf("client: %s=%q, want %q", k, env[k], v)
			}
		}
		if _, ok := env["KUBE_DNS_SERVICE_HOST"]; ok {
			t.Errorf("client sees kube-system's kube-dns variables")
		}
		env = envOf(c.OK(t, "exec", "nodns", "--", "env"))
		if _, ok := env["WEB_SERVICE_HOST"]; ok || env["KUBERNETES_SERVICE_HOST"] != kubeIP {
			t.Errorf("enableServiceLinks false: WEB_SERVICE_HOST %q, KUBERNETES_SERVICE_HOST %q (want none and %s)",
				env["WEB_SERVICE_HOST"], env["KUBERNETES_SERVICE_HOST"], kubeIP)
		}
	})

	t.Run("CoreDNS serves in its pods", func(t *testing.T) {
		var l corev1.PodList
		getJSON(t, c, &l, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-dns")
		for _, p := range l.Items {
			// health answers without the API; ready waits for the
			// kubernetes plugin, which needs the apiserver through the
			// kubernetes Service.
			poll(t, 60*time.Second, "CoreDNS health of "+p.Name, func() error {
				r := c.Run(t, "exec", "client", "--", "wget", "-qO-", "http://"+p.Status.PodIP+":8080/health")
				if r.Err != nil || strings.TrimSpace(r.Stdout) != "OK" {
					return fmt.Errorf("%s", r)
				}
				return nil
			})
		}
	})

	// needProxy skips t unless the node's proxy routes 10.96.0.10 and the
	// apiserver at 10.96.0.1, then waits for the CoreDNS pods.
	needProxy := func(t *testing.T) {
		t.Helper()
		if out, err := exec.Command("ip", "netns", "exec", filepath.Base(c.netnsPath()), "nft", "list", "tables").CombinedOutput(); err != nil ||
			!strings.Contains(string(out), "cairn-proxy") {
			t.Skipf("the node runs no service proxy (nft list tables: %q, %v): 10.96.0.10 and the apiserver at 10.96.0.1 are not reachable from pods", out, err)
		}
		c.OK(t, "wait", "-n", "kube-system", "--for=condition=Ready", "pod", "-l", "k8s-app=kube-dns", "--timeout=180s")
	}
	t.Run("lookup from a pod through the proxy", func(t *testing.T) {
		needProxy(t)
		poll(t, 90*time.Second, "nslookup web.default.svc.cluster.local from client", func() error {
			r := c.Run(t, "exec", "client", "--", "nslookup", "web.default.svc.cluster.local")
			if r.Err != nil || !strings.Contains(r.Stdout, webIP) {
				return fmt.Errorf("%s", r)
			}
			return nil
		})
		c.OK(t, "wait", "--for=condition=Available", "deployment/web", "--timeout=180s")
		for _, name := range []string{"web", "web.default.svc.cluster.local"} {
			poll(t, 60*time.Second, "wget http://"+name+"/ from client", func() error {
				r := c.Run(t, "exec", "client", "--", "wget", "-qO-", "http://"+name+"/")
				if r.Err != nil || !strings.Contains(r.Stdout, "cairn busybox") {
					return fmt.Errorf("%s", r)
				}
				return nil
			})
		}
	})

	t.Run("StatefulSet pods by their stable names", func(t *testing.T) {
		needProxy(t)
		statefulSetDNS(t, c)
	})
}

// statefulSetDNS: the pods of the StatefulSet db (statefulDB, governed by
// the headless Service db) answer by their stable names
// db-N.db.default.svc.cluster.local, looked up from the pod client through
// the cluster DNS; a deleted db-0 comes back under its name, and the name
// answers the new pod's address.
func statefulSetDNS(t *testing.T, c *cluster) {
	r := c.RunWith(t, statefulDB, callTimeout, "apply", "-f", "-")
	if r.Err != nil || !strings.Contains(r.Stdout, "statefulset.apps/db created") {
		t.Fatalf("apply: %s", r)
	}
	r = c.RunWith(t, "", 3*time.Minute, "rollout", "status", "sts/db", "--timeout=150s")
	if r.Err != nil {
		t.Fatalf("rollout status: %s\n%s", r, c.Run(t, "get", "sts,pods", "-o", "wide").Stdout)
	}
	// answers waits until name resolves, from client, to the address of
	// the running pod pod other than the one with uid old.
	answers := func(name, pod string, old types.UID) {
		t.Helper()
		var ip string
		poll(t, podWait, pod+" running", func() error {
			var p corev1.Pod
			getJSON(t, c, &p, "get", "pod", pod)
			if p.UID == old || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
				return fmt.Errorf("%s: uid %s phase %s ip %q", pod, p.UID, p.Status.Phase, p.Status.PodIP)
			}
			ip = p.Status.PodIP
			return nil
		})
		poll(t, 90*time.Second, "nslookup "+name+" from client", func() error {
			r := c.Run(t, "exec", "client", "--", "nslookup", name)
			if r.Err != nil || !slices.Contains(nslookupAddrs(r.Stdout), ip) {
				return fmt.Errorf("want %s: %s", ip, r)
			}
			return nil
		})
	}
	answers("db-0.db.default.svc.cluster.local", "db-0", "")
	answers("db-1.db.default.svc.cluster.local", "db-1", "")
	var first corev1.Pod
	getJSON(t, c, &first, "get", "pod", "db-0")
	c.OK(t, "delete", "pod", "db-0")
	answers("db-0.db.default.svc.cluster.local", "db-0", first.UID)
	c.OK(t, "delete", "sts/db", "svc/db")
}

// nslookupAddrs are the answers in busybox nslookup's output: the
// "Address: IP" lines after the first Name line (before it is the server).
func nslookupAddrs(out string) []string {
	_, answers, _ := strings.Cut(out, "Name:")
	var ips []string
	for _, line := range strings.Split(answers, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Address:"); ok {
			ips = append(ips, strings.TrimSpace(v))
		}
	}
	return ips
}

func sameConfig(a, b dns.Config) bool {
	return slices.Equal(a.Servers, b.Servers) && slices.Equal(a.Searches, b.Searches) && slices.Equal(a.Options, b.Options)
}

func envOf(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

func getJSON(t *testing.T, c *cluster, into any, args ...string) {
	t.Helper()
	out := c.OK(t, append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), into); err != nil {
		t.Fatalf("kubectl %v: %v", args, err)
	}
}
