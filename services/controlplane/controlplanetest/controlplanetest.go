// Package controlplanetest starts a complete control plane (embedded etcd and
// NATS, publisher, hub, apiserver on plain HTTP with bearer tokens, or on
// HTTPS with a cluster CA as cairn up serves it) for one test and stops it
// with t.Cleanup. Clients get a rest.Config, a clientset
// and a kubeconfig for the real kubectl.
package controlplanetest

import (
	"context"
	"crypto/tls"
	"fmt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/pki"
)

// Tokens of the users every test environment knows.
const (
	AdminToken      = "admin-token"
	ControllerToken = "controller-token"
	SchedulerToken  = "scheduler-token"
	ProxyToken      = "proxy-token" // system:kube-proxy, a node's proxy
	UserToken       = "alice-token" // an ordinary user with no rights
)

// Env is a running control plane for a test.
type Env struct {
	*controlplane.ControlPlane
	URL        string
	Config     *rest.Config
	Client     *kubernetes.Clientset
	Kubeconfig string
	// Dir is the control plane's data directory (its service-account
	// keys are in Dir/pki).
	Dir string
}

// Options tweak the environment.
type Options struct {
	Admission []apiserver.AdmissionPlugin
	// Authorizer replaces the RBAC authorizer (controlplane.Config).
	Authorizer apiserver.Authorizer
	// Fsync makes etcd durable (benchmarks); tests run without fsync.
	Fsync bool
	// KubeletClientTLS is the apiserver's TLS configuration towards
	// kubelets (pods/log, pods/exec), e.g. pki.KubeletClientTLSConfig.
	KubeletClientTLS *tls.Config
	// TLS serves HTTPS with a serving certificate from a fresh cluster CA,
	// as cairn up does, so that clients speak HTTP/2 as they do there
	// (benchmarks); the tokens still authenticate.
	TLS bool
	// ServiceAccountAdmission runs the ServiceAccount admission plugin
	// (controlplane.Config).
	ServiceAccountAdmission bool
	// MaxTokenExpiration is controlplane.Config's.
	MaxTokenExpiration time.Duration
	// RequestTimeout is controlplane.Config's.
	RequestTimeout time.Duration
	// DisableProfiling is controlplane.Config's.
	DisableProfiling bool
	// NodeNetNS is controlplane.Config.NodeNetNS (service webhooks).
	NodeNetNS func(node string) (string, bool)
	// NodeAuthorizer runs the Node authorizer and NodeRestriction
	// (controlplane.Config).
	NodeAuthorizer bool
	// MaxRequestsInFlight is controlplane.Config's (API Priority and
	// Fairness's server concurrency limit).
	MaxRequestsInFlight int
	// PriorityAndFairness is controlplane.Config's.
	PriorityAndFairness bool
}

// Start starts a control plane in t.TempDir().
func Start(t testing.TB, opts ...Options) *Env {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ca *pki.PKI
	var serverTLS *tls.Config
	if o.TLS {
		if ca, err = pki.Load(filepath.Join(dir, "pki"), nil); err != nil {
			t.Fatal(err)
		}
		serverTLS = ca.ServerTLSConfig()
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{
		TLS:      serverTLS,
		DataDir:  dir,
		Listener: ln,
		NoFsync:  !o.Fsync,
		// Client certificates of the cluster CA (Env.Dir/pki) work too
		// under TLS, as kubelets authenticate.
		Authenticator: apiserver.Authenticators{apiserver.X509Authenticator{}, apiserver.TokenAuthenticator{
			AdminToken:      {User: "admin", Groups: []string{apiserver.GroupMasters}},
			ControllerToken: {User: apiserver.UserControllers},
			SchedulerToken:  {User: apiserver.UserScheduler},
			ProxyToken:      {User: apiserver.UserKubeProxy},
			UserToken:       {User: "alice"},
		}},
		Admission:               o.Admission,
		ServiceAccountAdmission: o.ServiceAccountAdmission,
		MaxTokenExpiration:      o.MaxTokenExpiration,
		RequestTimeout:          o.RequestTimeout,
		DisableProfiling:        o.DisableProfiling,
		NodeAuthorizer:          o.NodeAuthorizer,
		Authorizer:              o.Authorizer,
		KubeletClientTLS:        o.KubeletClientTLS,
		NodeNetNS:               o.NodeNetNS,
		MaxRequestsInFlight:     o.MaxRequestsInFlight,
		PriorityAndFairness:     o.PriorityAndFairness,
	})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(cp.Close)
	url := "http://" + cp.Addr
	cfg := &rest.Config{Host: url, BearerToken: AdminToken, QPS: -1, Burst: -1}
	var caPEM []byte
	if ca != nil {
		url = "https://" + cp.Addr
		caPEM = ca.CAPEM
		cfg.Host, cfg.TLSClientConfig = url, rest.TLSClientConfig{CAData: caPEM}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kc, url, caPEM, AdminToken); err != nil {
		t.Fatal(err)
	}
	return &Env{ControlPlane: cp, URL: url, Config: cfg, Client: cs, Kubeconfig: kc, Dir: dir}
}

// ConfigFor is a rest.Config authenticating with another token.
func (e *Env) ConfigFor(token string) *rest.Config {
	c := rest.CopyConfig(e.Config)
	c.BearerToken = token
	return c
}

func writeKubeconfig(path, server string, caPEM []byte, token string) error {
	c := clientcmdapi.NewConfig()
	c.Clusters["cairn"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	c.Contexts["cairn"] = &clientcmdapi.Context{Cluster: "cairn", AuthInfo: "admin", Namespace: "default"}
	c.CurrentContext = "cairn"
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return os.Chmod(path, 0o600)
}

// Runner is anything with a blocking Run, as every cairn service has.
type Runner interface {
	Run(ctx context.Context) error
}

// Run runs r until the test ends: the cleanup cancels it, waits for it to
// return and fails the test if it returned an error. The returned context
// ends when r is stopped.
func Run(t testing.TB, r Runner) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return ctx
}

// SyncRunner is a Runner with caches to wait for.
type SyncRunner interface {
	Runner
	WaitForSync(ctx context.Context) error
}

// RunSynced runs r as Run does and returns once its caches are synced (or
// fails the test after 30 s), so that what the test writes next reaches
// r as events.
func RunSynced(t testing.TB, r SyncRunner) context.Context {
	t.Helper()
	ctx := Run(t, r)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.WaitForSync(sctx); err != nil {
		t.Fatalf("wait for sync: %v", err)
	}
	return ctx
}

// RunStoppable runs r as RunSynced does, and returns stop, which cancels
// it and waits for it to return (a replica that goes away while the test
// goes on); the cleanup stops it if the test did not.
func RunStoppable(t testing.TB, r SyncRunner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	t.Cleanup(stop)
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if err := r.WaitForSync(sctx); err != nil {
		t.Fatalf("wait for sync: %v", err)
	}
	return stop
}

// CreatePod creates p through env's admin client or fails the test.
func CreatePod(t testing.TB, env *Env, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := env.Client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
	return out
}

// GetPod reads a pod through env's admin client or fails the test.
func GetPod(t testing.TB, env *Env, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := env.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

// Logger discards logs unless the environment variable env is set, in which
// case it writes debug logs to stderr: how tests let a developer watch a
// controller.
func Logger(env string) *slog.Logger {
	if os.Getenv(env) == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Deployment is a Deployment of replicas pods labelled app=<name> (its
// selector), each running the one container c.
func Deployment(namespace, name string, replicas int32, c corev1.Container) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
			},
		},
	}
}

// WaitForLog waits until the log holds the last write committed to etcd
// (the publisher publishes it a little after the apiserver answers), on
// whichever stream it goes to, and returns etcd's current revision. Tests
// that read the log back after their writes call it first.
func WaitForLog(t testing.TB, env *Env) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := env.Etcd.Get(ctx, events.MetaKey)
	if err != nil {
		t.Fatalf("etcd get: %v", err)
	}
	if len(resp.Kvs) > 0 {
		if err := events.WaitPublished(ctx, env.JS, events.Revision(resp.Kvs[0].ModRevision)); err != nil {
			t.Fatalf("the log did not catch up with etcd: %v", err)
		}
	}
	return resp.Header.Revision
}
