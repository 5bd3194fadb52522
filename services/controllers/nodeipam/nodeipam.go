package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// ErrConfig is returned by New for a bad Config.
var ErrConfig = errors.New("nodeipam: bad config")

// Key is the one work key of the allocator (see the package doc).
const Key = "cluster"

// Defaults: room for 16,384 nodes of 254 pods each.
const (
	DefaultClusterCIDR = "10.64.0.0/10"
	DefaultNodeMask    = 24
)

// Options configure the allocator.
type Options struct {
	// ClusterCIDR is carved into node subnets; default DefaultClusterCIDR.
	ClusterCIDR string
	// NodeMask is the prefix length of a node's subnet; default 24.
	NodeMask int
}

// Controller is the node IPAM controller.
type Controller struct {
	cfg     Options
	cluster netip.Prefix
	size    int // subnets in the cluster CIDR
	log     *slog.Logger
	client  kubernetes.Interface
	cache   *consumer.Cache[*corev1.Node]
	ctrl    *consumer.Controller
	// given are subnets this replica wrote, by node name, until its cache
	// shows them (only the reconcile, one at a time, touches it).
	given map[string]netip.Prefix
}

// New builds the controller on m's node cache; whether this replica
// allocates is m's shard's say on Key.
func New(m *consumer.Manager, cfg Options) (*Controller, error) {
	if cfg.ClusterCIDR == "" {
		cfg.ClusterCIDR = DefaultClusterCIDR
	}
	if cfg.NodeMask == 0 {
		cfg.NodeMask = DefaultNodeMask
	}
	cluster, err := netip.ParsePrefix(cfg.ClusterCIDR)
	if err != nil || !cluster.Addr().Is4() {
		return nil, fmt.Errorf("nodeipam: cluster CIDR %q is not an IPv4 prefix: %w", cfg.ClusterCIDR, ErrConfig)
	}
	cluster = cluster.Masked()
	if cfg.NodeMask < cluster.Bits() || cfg.NodeMask > 30 || cfg.NodeMask-cluster.Bits() > 20 {
		return nil, fmt.Errorf("nodeipam: node mask /%d does not fit cluster CIDR %s: %w", cfg.NodeMask, cluster, ErrConfig)
	}
	c := &Controller{cfg: cfg, cluster: cluster, size: 1 << (cfg.NodeMask - cluster.Bits()),
		log: m.Log().With("controller", "nodeipam"), client: m.Client(), given: map[string]netip.Prefix{}}
	if c.cache, err = consumer.CacheFor[*corev1.Node](m, corev1.SchemeGroupVersion.WithResource("nodes")); err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	c.ctrl, err = m.NewController(consumer.ControllerConfig{Name: "nodeipam", Reconciler: c, Workers: 1,
		WaitFor: []consumer.Syncer{c.cache}, Log: c.log})
	if err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	consumer.For(c.cache, c.ctrl, func(*corev1.Node) []string { return []string{Key} })
	return c, nil
}

// subnet is the i-th node subnet of the cluster CIDR.
func (c *Controller) subnet(i int) netip.Prefix {
	base := new(big.Int).SetBytes(c.cluster.Addr().AsSlice())
	base.Add(base, new(big.Int).Lsh(big.NewInt(int64(i)), uint(32-c.cfg.NodeMask)))
	var b [4]byte
	base.FillBytes(b[:])
	return netip.PrefixFrom(netip.AddrFrom4(b), c.cfg.NodeMask)
}

// index is the position of p in the cluster CIDR, or -1 if p is not one of
// its node subnets.
func (c *Controller) index(p netip.Prefix) int {
	if p.Bits() != c.cfg.NodeMask || !c.cluster.Contains(p.Addr()) {
		return -1
	}
	a, b := c.cluster.Addr().As4(), p.Masked().Addr().As4()
	off := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) -
		(uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]))
	return int(off >> (32 - c.cfg.NodeMask))
}

// Reconcile gives a subnet to every node without one.
func (c *Controller) Reconcile(ctx context.Context, _ consumer.Request) (consumer.Result, error) {
	if err := c.cache.WaitForLog(ctx); err != nil {
		return consumer.Result{}, err
	}
	nodes := c.cache.List(labels.Everything())
	used := make([]bool, c.size)
	var todo []*corev1.Node
	for _, n := range nodes {
		if n.Spec.PodCIDR == "" {
			if p, ok := c.given[n.Name]; ok {
				used[c.index(p)] = true
				continue
			}
			todo = append(todo, n)
			continue
		}
		delete(c.given, n.Name)
		if p, err := netip.ParsePrefix(n.Spec.PodCIDR); err == nil {
			if i := c.index(p); i >= 0 {
				used[i] = true
			}
		}
	}
	present := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		present[n.Name] = true
	}
	for name := range c.given {
		if !present[name] {
			delete(c.given, name)
		}
	}
	next := 0
	for _, n := range todo {
		for next < c.size && used[next] {
			next++
		}
		if next == c.size {
			return consumer.Result{}, consumer.TerminalError(fmt.Errorf("nodeipam: no pod CIDR left in %s for node %s", c.cluster, n.Name))
		}
		p := c.subnet(next)
		if err := c.assign(ctx, n, p); err != nil {
			return consumer.Result{}, err
		}
		used[next] = true
	}
	return consumer.Result{}, nil
}

// assign writes p into the node, only if the node is still as cached.
func (c *Controller) assign(ctx context.Context, n *corev1.Node, p netip.Prefix) error {
	upd := n.DeepCopy()
	upd.Spec.PodCIDR = p.String()
	upd.Spec.PodCIDRs = []string{p.String()}
	_, err := c.client.CoreV1().Nodes().Update(ctx, upd, metav1.UpdateOptions{})
	switch {
	case err == nil:
		c.given[n.Name] = p
		c.log.Info("allocated pod CIDR", "node", n.Name, "podCIDR", p)
		return nil
	case apierrors.IsNotFound(err):
		return nil
	default:
		// A conflict: the node changed; the next round sees it.
		return fmt.Errorf("nodeipam: assign %s to node %s: %w", p, n.Name, err)
	}
}

// Resync queues the allocator with the given cause (the replica's
// takeover); Owns drops it on the replicas that do not own Key.
func (c *Controller) Resync(cause *events.Event) { c.ctrl.Enqueue(Key, cause) }
