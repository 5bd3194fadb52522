package csiclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ErrNotReady is Probe's answer when the driver says it is not ready.
var ErrNotReady = errors.New("csiclient: driver not ready")

// SocketPath turns a CSI endpoint (unix:///path, unix:path or a plain
// /path) into the socket's path. Other schemes are refused: CSI drivers
// are reached on the local machine.
func SocketPath(endpoint string) (string, error) {
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		endpoint = strings.TrimPrefix(endpoint, "unix://")
	case strings.HasPrefix(endpoint, "unix:"):
		endpoint = strings.TrimPrefix(endpoint, "unix:")
	case strings.Contains(endpoint, "://"):
		return "", fmt.Errorf("csiclient: endpoint %q: only unix sockets are supported", endpoint)
	}
	if endpoint == "" {
		return "", errors.New("csiclient: an endpoint is required")
	}
	return endpoint, nil
}

// Client holds one connection to a driver and its three service clients.
type Client struct {
	Endpoint   string
	Identity   csi.IdentityClient
	Controller csi.ControllerClient
	Node       csi.NodeClient

	conn *grpc.ClientConn
}

// Dial makes a client for the driver at endpoint. It does not wait for the
// driver: calls fail (Unavailable) until it listens; see WaitReady.
func Dial(endpoint string) (*Client, error) {
	path, err := SocketPath(endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// The authority of a unix target is its path, which gRPC would
		// send as :authority; drivers expect localhost (csi-test dials
		// the same way).
		grpc.WithAuthority("localhost"))
	if err != nil {
		return nil, fmt.Errorf("csiclient: dial %s: %w", endpoint, err)
	}
	return &Client{
		Endpoint:   endpoint,
		Identity:   csi.NewIdentityClient(conn),
		Controller: csi.NewControllerClient(conn),
		Node:       csi.NewNodeClient(conn),
		conn:       conn,
	}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Probe asks the driver whether it is ready. A driver that leaves ready
// unset is ready, as the spec says.
func (c *Client) Probe(ctx context.Context) error {
	resp, err := c.Identity.Probe(ctx, &csi.ProbeRequest{})
	if err != nil {
		return fmt.Errorf("csiclient: probe %s: %w", c.Endpoint, err)
	}
	if r := resp.GetReady(); r != nil && !r.GetValue() {
		return ErrNotReady
	}
	return nil
}

// WaitReady probes every interval until the driver is ready or ctx ends;
// it returns the last probe's error when ctx ends first.
func (c *Client) WaitReady(ctx context.Context, interval time.Duration) error {
	for {
		err := c.Probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// Info is what the Identity and Node services say about a driver on a node.
type Info struct {
	Name    string
	Version string
	// Plugin, Controller and Node are the capabilities of each service.
	Plugin     PluginCaps
	Controller ControllerCaps
	// Node* come from NodeGetInfo.
	Node              NodeCaps
	NodeID            string
	MaxVolumesPerNode int64
	Topology          map[string]string
}

// PluginCaps is the set of plugin service capabilities.
type PluginCaps map[csi.PluginCapability_Service_Type]bool

// ControllerCaps is the set of controller RPC capabilities.
type ControllerCaps map[csi.ControllerServiceCapability_RPC_Type]bool

// NodeCaps is the set of node RPC capabilities.
type NodeCaps map[csi.NodeServiceCapability_RPC_Type]bool

// PluginInfo returns the driver's name, version and plugin capabilities.
func (c *Client) PluginInfo(ctx context.Context) (Info, error) {
	var info Info
	pi, err := c.Identity.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return info, fmt.Errorf("csiclient: GetPluginInfo: %w", err)
	}
	info.Name, info.Version = pi.GetName(), pi.GetVendorVersion()
	pc, err := c.Identity.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		return info, fmt.Errorf("csiclient: GetPluginCapabilities: %w", err)
	}
	info.Plugin = PluginCaps{}
	for _, cp := range pc.GetCapabilities() {
		if s := cp.GetService(); s != nil {
			info.Plugin[s.GetType()] = true
		}
	}
	return info, nil
}

// ControllerCapabilities returns the controller service's capabilities.
func (c *Client) ControllerCapabilities(ctx context.Context) (ControllerCaps, error) {
	resp, err := c.Controller.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		return nil, fmt.Errorf("csiclient: ControllerGetCapabilities: %w", err)
	}
	caps := ControllerCaps{}
	for _, cp := range resp.GetCapabilities() {
		if r := cp.GetRpc(); r != nil {
			caps[r.GetType()] = true
		}
	}
	return caps, nil
}

// NodeCapabilities returns the node service's capabilities.
func (c *Client) NodeCapabilities(ctx context.Context) (NodeCaps, error) {
	resp, err := c.Node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nil, fmt.Errorf("csiclient: NodeGetCapabilities: %w", err)
	}
	caps := NodeCaps{}
	for _, cp := range resp.GetCapabilities() {
		if r := cp.GetRpc(); r != nil {
			caps[r.GetType()] = true
		}
	}
	return caps, nil
}

// NodeInfo gathers what a kubelet registers for a driver: plugin info,
// node capabilities and NodeGetInfo (node id, volume limit, topology).
func (c *Client) NodeInfo(ctx context.Context) (Info, error) {
	info, err := c.PluginInfo(ctx)
	if err != nil {
		return info, err
	}
	if info.Node, err = c.NodeCapabilities(ctx); err != nil {
		return info, err
	}
	ni, err := c.Node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		return info, fmt.Errorf("csiclient: NodeGetInfo: %w", err)
	}
	info.NodeID, info.MaxVolumesPerNode = ni.GetNodeId(), ni.GetMaxVolumesPerNode()
	info.Topology = ni.GetAccessibleTopology().GetSegments()
	return info, nil
}
