package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/kubelet/hollow"
)

// HollowConfig configures many hollow kubelets in one process.
type HollowConfig struct {
	RestConfig *rest.Config
	JS         jetstream.JetStream
	// Nodes is how many hollow nodes to run.
	Nodes int
	// NamePrefix names them <prefix><i>, i from 0; empty is "hollow-".
	NamePrefix string
	// Name, when set, is the name of the one node (Nodes must be 1): a
	// hollow node that joined with its own identity (system:node:<Name>).
	Name string
	// StartDelay is how long a pod takes to start (see hollow.Config).
	StartDelay time.Duration
	// Capacity overrides the hollow defaults (4 cpu, 16Gi, 110 pods).
	Capacity corev1.ResourceList
	Labels   map[string]string
	// NodeStatusInterval, RelistPeriod, ResyncPeriod: see Config; hollow
	// nodes default to 30s, 5s and 60s to stay cheap.
	NodeStatusInterval, RelistPeriod, ResyncPeriod time.Duration
	// LeaseRenewInterval: see Config (10s, as real nodes).
	LeaseRenewInterval time.Duration
	Log                *slog.Logger
}

// NewHollow builds n hollow kubelets sharing one client (and the caller's
// NATS connection); each has its own pod cache, filtered on the server to
// its node. Node i gets the fake pod CIDR 10.(64+i/256).(i%256).0/24 and
// the InternalIP 10.(i/256).(i%256).1, so addresses never collide.
func NewHollow(cfg HollowConfig) ([]*Kubelet, error) {
	if cfg.RestConfig == nil || cfg.JS == nil || cfg.Nodes <= 0 {
		return nil, fmt.Errorf("kubelet: hollow: RestConfig, JS and Nodes are required: %w", ErrConfig)
	}
	if cfg.Name != "" && cfg.Nodes != 1 {
		return nil, fmt.Errorf("kubelet: hollow: Name needs Nodes 1: %w", ErrConfig)
	}
	if cfg.Nodes > 64*256 {
		return nil, fmt.Errorf("kubelet: hollow: at most %d nodes: %w", 64*256, ErrConfig)
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = "hollow-"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.NodeStatusInterval, 30*time.Second)
	def(&cfg.RelistPeriod, 5*time.Second)
	def(&cfg.ResyncPeriod, time.Minute)
	rc := rest.CopyConfig(cfg.RestConfig)
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = -1, -1
	}
	client, err := kubernetes.NewForConfig(consumer.WrapConfig(rc))
	if err != nil {
		return nil, fmt.Errorf("kubelet: hollow client: %w", err)
	}
	out := make([]*Kubelet, 0, cfg.Nodes)
	for i := range cfg.Nodes {
		rt, err := hollow.New(hollow.Config{StartDelay: cfg.StartDelay,
			PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256)})
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%s%d", cfg.NamePrefix, i)
		if cfg.Name != "" {
			name = cfg.Name
		}
		k, err := New(Config{
			RestConfig: rc, Client: client, JS: cfg.JS,
			NodeName: name, Runtime: rt,
			NodeIP:   fmt.Sprintf("10.%d.%d.1", i/256, i%256),
			Capacity: cfg.Capacity, Labels: cfg.Labels,
			NodeStatusInterval: cfg.NodeStatusInterval, RelistPeriod: cfg.RelistPeriod,
			ResyncPeriod: cfg.ResyncPeriod, LeaseRenewInterval: cfg.LeaseRenewInterval, Log: cfg.Log,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// RunHollow runs cfg.Nodes hollow kubelets until ctx ends (see NewHollow).
func RunHollow(ctx context.Context, cfg HollowConfig) error {
	ks, err := NewHollow(cfg)
	if err != nil {
		return err
	}
	runners := make([]consumer.Runner, len(ks))
	for i, k := range ks {
		runners[i] = k
	}
	if err := consumer.RunAll(ctx, runners...); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
