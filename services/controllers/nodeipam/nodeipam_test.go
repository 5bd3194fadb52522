package nodeipam

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestSubnets(t *testing.T) {
	c := &Controller{cfg: Options{NodeMask: 24}}
	var err error
	if c.cluster, err = netip.ParsePrefix("10.64.0.0/10"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		i    int
		want string
	}{{0, "10.64.0.0/24"}, {1, "10.64.1.0/24"}, {256, "10.65.0.0/24"}, {16383, "10.127.255.0/24"}} {
		got := c.subnet(tc.i)
		if got.String() != tc.want {
			t.Errorf("subnet(%d) = %s, want %s", tc.i, got, tc.want)
		}
		if back := c.index(got); back != tc.i {
			t.Errorf("index(%s) = %d, want %d", got, back, tc.i)
		}
	}
	if p, _ := netip.ParsePrefix("192.168.0.0/24"); c.index(p) != -1 {
		t.Errorf("a subnet outside the cluster CIDR has an index")
	}
}

// TestAllocate: every node gets its own subnet of the cluster CIDR; a
// deleted node's subnet is given again; a node that has one keeps it.
func TestAllocate(t *testing.T) {
	env := controlplanetest.Start(t)
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("IPAM_TEST_LOG"), nil)
	if _, err := New(m, Options{ClusterCIDR: "10.200.0.0/22", NodeMask: 24}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := env.Client.CoreV1().Nodes()
	pre := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "preset"}, Spec: corev1.NodeSpec{PodCIDR: "10.200.0.0/24", PodCIDRs: []string{"10.200.0.0/24"}}}
	if _, err := nodes.Create(ctx, pre, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.Run(t, m)
	for i := range 3 {
		if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"preset": "10.200.0.0/24", "n0": "10.200.1.0/24", "n1": "10.200.2.0/24", "n2": "10.200.3.0/24"}
	waitCIDRs(ctx, t, env, want)

	// The CIDR is full; deleting n1 frees its subnet for the next node.
	if err := nodes.Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	delete(want, "n1")
	want["n3"] = "10.200.2.0/24"
	waitCIDRs(ctx, t, env, want)
}

func waitCIDRs(ctx context.Context, t *testing.T, env *controlplanetest.Env, want map[string]string) {
	t.Helper()
	var got map[string]string
	for ctx.Err() == nil {
		list, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]string{}
		ok := len(list.Items) == len(want)
		for _, n := range list.Items {
			got[n.Name] = n.Spec.PodCIDR
			if want[n.Name] != n.Spec.PodCIDR || len(n.Spec.PodCIDRs) != 1 || n.Spec.PodCIDRs[0] != n.Spec.PodCIDR {
				ok = false
			}
		}
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pod CIDRs %v, want %v", got, want)
}
