package clusterdns

import (
	"context"
	"strings"
	"testing"

	"github.com/coredns/coredns/coremain"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestImageVersion: the image tag names the CoreDNS that is linked.
func TestImageVersion(t *testing.T) {
	if coremain.CoreVersion != images.CoreDNSVersion {
		t.Fatalf("linked CoreDNS %s, image tag %s", coremain.CoreVersion, images.CoreDNSVersion)
	}
}

// TestEnsure deploys the objects into a real control plane as cairn up
// does, twice (idempotent), keeps a user's Corefile, and rolls a new image
// into the Deployment.
func TestEnsure(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := context.Background()
	opts := Options{Kubeconfig: []byte("apiVersion: v1\nkind: Config\n")}
	for range 2 {
		if err := Ensure(ctx, env.Client, opts, nil); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := env.Client.CoreV1().Services(Namespace).Get(ctx, ServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != DefaultClusterIP || len(svc.Spec.Ports) != 3 || svc.Spec.Selector["k8s-app"] != "kube-dns" {
		t.Fatalf("kube-dns: %+v", svc.Spec)
	}
	d, err := env.Client.AppsV1().Deployments(Namespace).Get(ctx, Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Spec.Template.Spec.Containers[0]; c.Image != images.CoreDNSRef || len(d.Spec.Template.Spec.Volumes) != 2 {
		t.Fatalf("deployment: image %s, volumes %v", c.Image, d.Spec.Template.Spec.Volumes)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(Namespace).Get(ctx, Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cf := cm.Data["Corefile"]; !strings.Contains(cf, "kubeconfig "+KubeconfigDir+"/kubeconfig") || strings.Contains(cf, "forward") {
		t.Fatalf("Corefile:\n%s", cf)
	}
	if _, err := env.Client.CoreV1().Secrets(Namespace).Get(ctx, KubeconfigName, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{RoleName} {
		if _, err := env.Client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Client.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A user's Corefile survives; a new image rolls in.
	cm.Data["Corefile"] += "# mine\n"
	if _, err := env.Client.CoreV1().ConfigMaps(Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	opts.Image = "cairn.local/coredns:next"
	opts.Forward = "/etc/resolv.conf"
	if err := Ensure(ctx, env.Client, opts, nil); err != nil {
		t.Fatal(err)
	}
	cm, err = env.Client.CoreV1().ConfigMaps(Namespace).Get(ctx, Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(cm.Data["Corefile"], "# mine\n") {
		t.Fatalf("the user's Corefile was replaced:\n%s", cm.Data["Corefile"])
	}
	d, err = env.Client.AppsV1().Deployments(Namespace).Get(ctx, Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Spec.Template.Spec.Containers[0]; c.Image != "cairn.local/coredns:next" {
		t.Fatalf("image %s after Ensure with a new one", c.Image)
	}
}

func TestCorefileForward(t *testing.T) {
	cf := Corefile(CorefileOptions{Forward: "/etc/resolv.conf"})
	for _, want := range []string{".:53 {", "forward . /etc/resolv.conf {", "    loop\n", "kubernetes cluster.local in-addr.arpa ip6.arpa {", "prometheus :9153", "health :8080 {", "ready :8181"} {
		if !strings.Contains(cf, want) {
			t.Errorf("Corefile lacks %q:\n%s", want, cf)
		}
	}
	if cf := Corefile(CorefileOptions{}); strings.Contains(cf, "forward") || strings.Contains(cf, "loop") {
		t.Errorf("default Corefile forwards:\n%s", cf)
	}
}
