package clusterdns

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controllers/endpoint"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

const wait = 60 * time.Second

// freeAddr is a loopback address with a port free for both TCP and UDP.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err == nil {
			pc.Close()
			return addr
		}
	}
	t.Fatal("no free port for TCP and UDP")
	return ""
}

// startDNS runs CoreDNS with cairn's Corefile against env on loopback and
// waits until its ready plugin says the kubernetes plugin has synced. It
// returns the DNS address.
func startDNS(t *testing.T, env *controlplanetest.Env) string {
	t.Helper()
	dnsAddr, ready := freeAddr(t), freeAddr(t)
	_, port, _ := net.SplitHostPort(dnsAddr)
	portNum, _ := strconv.Atoi(port)
	conf := Corefile(CorefileOptions{
		Port: portNum, Bind: "127.0.0.1", Health: freeAddr(t), Ready: ready, Metrics: freeAddr(t),
		Kubeconfig: env.Kubeconfig, TTL: 5,
	})
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, path) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("clusterdns.Run: %v", err)
		}
	})
	controlplanetest.Eventually(t, wait, "CoreDNS ready", func() bool {
		select {
		case err := <-done:
			t.Fatalf("CoreDNS stopped: %v\n%s", err, conf)
		default:
		}
		resp, err := http.Get("http://" + ready + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return dnsAddr
}

// query asks addr over UDP, retrying transport errors (the server starts
// listening just after its ready plugin answers) until the deadline.
func query(t *testing.T, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Timeout: 5 * time.Second}
	var last error
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r, _, err := c.Exchange(m, addr)
		if err == nil {
			return r
		}
		last = err
	}
	t.Fatalf("query %s %s: %v", name, dns.TypeToString[qtype], last)
	return nil
}

// aRecords are the sorted addresses of the A answers and the rcode.
func aRecords(t *testing.T, addr, name string) ([]string, int) {
	t.Helper()
	r := query(t, addr, name, dns.TypeA)
	var ips []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	slices.Sort(ips)
	return ips, r.Rcode
}

func eventuallyA(t *testing.T, addr, name string, want ...string) {
	t.Helper()
	var got []string
	var rcode int
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		got, rcode = aRecords(t, addr, name)
		if slices.Equal(got, want) && (len(want) > 0 || rcode == dns.RcodeNameError) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: A %v (%s), want %v", name, got, dns.RcodeToString[rcode], want)
}

func readyPod(t *testing.T, env *controlplanetest.Env, name, hostname, subdomain, ip string, labels map[string]string, ready bool) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: "node-a", Hostname: hostname, Subdomain: subdomain,
			Containers: []corev1.Container{{Name: "c", Image: "cairn.local/busybox:1.36",
				Ports: []corev1.ContainerPort{{Name: "pg", ContainerPort: 5432}}}}},
	}
	p, err := env.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setReady(t, env, p, ip, ready)
}

func setReady(t *testing.T, env *controlplanetest.Env, p *corev1.Pod, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	for range 5 {
		cur, err := env.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status.Phase = corev1.PodRunning
		cur.Status.PodIP, cur.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
		if _, err = env.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil {
			return
		}
	}
	t.Fatalf("pod %s: status not written", p.Name)
}

// TestCoreDNSAnswersFromTheAPI runs CoreDNS (cairn's Corefile, the real
// kubernetes plugin reading through client-go) against a real control
// plane with the real EndpointSlice controller, and queries it over UDP:
// A records of a ClusterIP Service, a headless Service answering with
// every ready pod, <hostname>.<subdomain> names of pods, SRV of named
// ports, NXDOMAIN for unknown names, and answers that follow changes.
func TestCoreDNSAnswersFromTheAPI(t *testing.T) {
	// TLS: client-go sends a kubeconfig's credentials only over https.
	env := controlplanetest.Start(t, controlplanetest.Options{TLS: true})
	ctx := context.Background()
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("DNS_TEST_LOG"), nil)
	if _, err := endpoint.NewSlices(m, endpoint.SliceOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)

	web, err := env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "db"},
			Ports: []corev1.ServicePort{{Name: "pg", Port: 5432, TargetPort: intstr.FromString("pg")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	db := map[string]string{"app": "db"}
	readyPod(t, env, "db-0", "db-0", "db", "10.244.0.10", db, true)
	readyPod(t, env, "db-1", "db-1", "db", "10.244.0.11", db, true)
	readyPod(t, env, "db-2", "db-2", "db", "10.244.0.12", db, false)

	addr := startDNS(t, env)

	eventuallyA(t, addr, "web.default.svc.cluster.local", web.Spec.ClusterIP)
	// The headless Service answers with its ready pods only.
	eventuallyA(t, addr, "db.default.svc.cluster.local", "10.244.0.10", "10.244.0.11")
	eventuallyA(t, addr, "db-0.db.default.svc.cluster.local", "10.244.0.10")
	eventuallyA(t, addr, "db-1.db.default.svc.cluster.local", "10.244.0.11")
	// pods insecure: the dashed pod name answers with its address.
	eventuallyA(t, addr, "10-244-0-10.default.pod.cluster.local", "10.244.0.10")
	eventuallyA(t, addr, "nope.default.svc.cluster.local")
	eventuallyA(t, addr, "web.nons.svc.cluster.local")

	t.Run("SRV of named ports", func(t *testing.T) {
		r := query(t, addr, "_http._tcp.web.default.svc.cluster.local", dns.TypeSRV)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("SRV web: %v", r)
		}
		srv := r.Answer[0].(*dns.SRV)
		if srv.Port != 80 || srv.Target != "web.default.svc.cluster.local." {
			t.Fatalf("SRV web: %v", srv)
		}
		r = query(t, addr, "_pg._tcp.db.default.svc.cluster.local", dns.TypeSRV)
		var targets []string
		for _, rr := range r.Answer {
			s := rr.(*dns.SRV)
			if s.Port != 5432 {
				t.Fatalf("SRV db port %d", s.Port)
			}
			targets = append(targets, s.Target)
		}
		slices.Sort(targets)
		if want := []string{"db-0.db.default.svc.cluster.local.", "db-1.db.default.svc.cluster.local."}; !slices.Equal(targets, want) {
			t.Fatalf("SRV db targets %v, want %v", targets, want)
		}
	})

	t.Run("answers follow changes", func(t *testing.T) {
		p, err := env.Client.CoreV1().Pods("default").Get(ctx, "db-2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setReady(t, env, p, "10.244.0.12", true)
		eventuallyA(t, addr, "db.default.svc.cluster.local", "10.244.0.10", "10.244.0.11", "10.244.0.12")
		if err := env.Client.CoreV1().Pods("default").Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventuallyA(t, addr, "db.default.svc.cluster.local", "10.244.0.11", "10.244.0.12")
		eventuallyA(t, addr, "db-0.db.default.svc.cluster.local")

		if _, err := env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "late"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 81}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		late, err := env.Client.CoreV1().Services("default").Get(ctx, "late", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventuallyA(t, addr, "late.default.svc.cluster.local", late.Spec.ClusterIP)
		if err := env.Client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventuallyA(t, addr, "web.default.svc.cluster.local")
	})
}

func port(t *testing.T) string {
	_, p, _ := net.SplitHostPort(freeAddr(t))
	return p
}

// TestBadCorefile: a Corefile naming a plugin cairn does not link is
// refused at start.
func TestBadCorefile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(".:"+port(t)+" {\n    bind 127.0.0.1\n    route53 example.org.:Z1\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), path); !errors.Is(err, ErrCorefile) {
		t.Fatalf("Run: %v, want ErrCorefile", err)
	}
}
