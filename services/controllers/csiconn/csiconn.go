package csiconn

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/csi/csiclient"
	"github.com/container-storage-interface/spec/lib/go/csi"
)

// ErrNoEndpoint is returned for a driver with no configured endpoint.
var ErrNoEndpoint = errors.New("csiconn: no endpoint for driver")

// ParseEndpoint splits a flag value NAME=unix:///path (or NAME=/path).
func ParseEndpoint(v string) (driver, endpoint string, err error) {
	driver, endpoint, ok := strings.Cut(v, "=")
	if !ok || driver == "" || endpoint == "" {
		return "", "", fmt.Errorf("csiconn: endpoint %q: want NAME=unix:///path", v)
	}
	if _, err := socketPath(endpoint); err != nil {
		return "", "", err
	}
	return driver, endpoint, nil
}

// socketPath is csiclient's, with the path required to be absolute (a
// controller-manager's working directory means nothing to a driver).
func socketPath(endpoint string) (string, error) {
	path, err := csiclient.SocketPath(endpoint)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("csiconn: endpoint %q: the socket path must be absolute", endpoint)
	}
	return path, nil
}

// Conn is one driver's controller service.
type Conn struct {
	*csiclient.Client
	Driver string

	mu     sync.Mutex
	probed bool
	caps   Capabilities
}

// Capabilities are what the driver said it does.
type Capabilities struct {
	// Topology: VOLUME_ACCESSIBILITY_CONSTRAINTS (the plugin capability).
	Topology bool
	// CreateDelete, PublishUnpublish, Expand, SingleNodeMultiWriter: the
	// controller capabilities of those names.
	CreateDelete, PublishUnpublish, Expand, SingleNodeMultiWriter bool
}

// Capabilities probes the driver once (GetPluginInfo must name Driver,
// GetPluginCapabilities, ControllerGetCapabilities) and returns what it
// found; a failed probe is retried on the next call.
func (c *Conn) Capabilities(ctx context.Context) (Capabilities, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.probed {
		return c.caps, nil
	}
	info, err := c.PluginInfo(ctx)
	if err != nil {
		return Capabilities{}, fmt.Errorf("csiconn: %s: %w", c.Driver, err)
	}
	if info.Name != c.Driver {
		return Capabilities{}, fmt.Errorf("csiconn: endpoint of %s serves driver %q", c.Driver, info.Name)
	}
	cc, err := c.ControllerCapabilities(ctx)
	if err != nil {
		return Capabilities{}, fmt.Errorf("csiconn: %s: %w", c.Driver, err)
	}
	caps := Capabilities{
		Topology:              info.Plugin[csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS],
		CreateDelete:          cc[csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME],
		PublishUnpublish:      cc[csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME],
		Expand:                cc[csi.ControllerServiceCapability_RPC_EXPAND_VOLUME],
		SingleNodeMultiWriter: cc[csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER],
	}
	c.caps, c.probed = caps, true
	return caps, nil
}

// Pool holds the connections of a controller-manager, one per driver.
// Safe for concurrent use.
type Pool struct {
	endpoints map[string]string
	mu        sync.Mutex
	conns     map[string]*Conn
}

// NewPool is a pool over endpoints (driver name -> unix endpoint).
func NewPool(endpoints map[string]string) (*Pool, error) {
	for d, e := range endpoints {
		if _, err := socketPath(e); err != nil {
			return nil, fmt.Errorf("csiconn: driver %s: %w", d, err)
		}
	}
	return &Pool{endpoints: endpoints, conns: map[string]*Conn{}}, nil
}

// Drivers are the names with an endpoint, sorted.
func (p *Pool) Drivers() []string {
	out := make([]string, 0, len(p.endpoints))
	for d := range p.endpoints {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// Has reports whether driver has an endpoint.
func (p *Pool) Has(driver string) bool {
	if p == nil {
		return false
	}
	_, ok := p.endpoints[driver]
	return ok
}

// Get returns driver's connection, made on first use (the socket need not
// exist yet: gRPC connects when called, and reconnects).
func (p *Pool) Get(driver string) (*Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[driver]; ok {
		return c, nil
	}
	ep, ok := p.endpoints[driver]
	if !ok {
		return nil, fmt.Errorf("%w %s", ErrNoEndpoint, driver)
	}
	cl, err := csiclient.Dial(ep)
	if err != nil {
		return nil, fmt.Errorf("csiconn: %s: %w", driver, err)
	}
	c := &Conn{Client: cl, Driver: driver}
	p.conns[driver] = c
	return c, nil
}

// Close closes every connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for d, c := range p.conns {
		errs = append(errs, c.Client.Close())
		delete(p.conns, d)
	}
	return errors.Join(errs...)
}

// Run holds the pool open until ctx ends, then closes its connections: a
// consumer.Runner, so that the Manager owns the pool's lifetime.
func (p *Pool) Run(ctx context.Context) error {
	<-ctx.Done()
	return p.Close()
}

// ForManager is the pool of m's process over endpoints, shared by the
// controllers that ask (the first one's endpoints win).
func ForManager(m *consumer.Manager, endpoints map[string]string) (*Pool, error) {
	return consumer.Shared(m, "csiconn", func() (*Pool, error) { return NewPool(endpoints) })
}

// EndpointsFlag is a repeatable flag.Value of NAME=unix:///path.
type EndpointsFlag map[string]string

// String lists the endpoints, sorted by driver.
func (f EndpointsFlag) String() string {
	var parts []string
	for _, d := range (&Pool{endpoints: f}).Drivers() {
		parts = append(parts, d+"="+f[d])
	}
	return strings.Join(parts, ",")
}

// Set adds one NAME=endpoint.
func (f EndpointsFlag) Set(v string) error {
	d, e, err := ParseEndpoint(v)
	if err != nil {
		return err
	}
	f[d] = e
	return nil
}
