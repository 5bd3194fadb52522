package proxy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestProxyFollowsTheLog runs a Proxy on a Manager against a real control
// plane: a Service and an EndpointSlice written through the apiserver end
// up as the Service's map element, and deleting the Service removes it.
func TestProxyFollowsTheLog(t *testing.T) {
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("PROXY_TEST_LOG"), nil)
	fake := newFakeNFT()
	if _, err := NewProxy(m, fake, Options{Config: Config{ClusterCIDR: cidr}}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Run(t, m)

	ctx := context.Background()
	client := m.Client()
	svc, err := client.CoreV1().Services("default").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "p80", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reject := "no-endpoint-services: " + svc.Spec.ClusterIP + " . tcp . 80 : goto reject-chain"
	controlplanetest.Eventually(t, 10*time.Second, reject, func() bool { return slices.Contains(elements(t, fake), reject) })

	s := slice("web", "web-1", ep{"10.180.0.1", "ready"})
	s.Namespace = "default"
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	chain := "service-" + hashAndTruncate("default/web/tcp/p80")
	live := "service-ips: " + svc.Spec.ClusterIP + " . tcp . 80 : goto " + chain
	controlplanetest.Eventually(t, 10*time.Second, live, func() bool { return slices.Contains(elements(t, fake), live) })

	if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Other Services (default/kubernetes) keep theirs.
	controlplanetest.Eventually(t, 10*time.Second, "web's element gone", func() bool {
		return !slices.ContainsFunc(elements(t, fake), func(e string) bool { return strings.Contains(e, " "+svc.Spec.ClusterIP+" ") })
	})
}

func elements(t *testing.T, fake *fakeNFT) []string {
	t.Helper()
	st := state{Chains: map[string][]string{}}
	for _, name := range fake.tableNames() {
		fake.addState(&st, name)
	}
	return st.Elements
}
