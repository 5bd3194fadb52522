package hostpath

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// checkCapabilities validates requested volume capabilities: each needs an
// access mode and the mount access type (block volumes are not offered).
// The error is InvalidArgument, as CreateVolume and the node calls require.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	for _, c := range caps {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}

func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return status.Error(codes.InvalidArgument, "volume capability is required")
	}
	if c.GetAccessMode() == nil || c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_UNKNOWN {
		return status.Error(codes.InvalidArgument, "volume capability needs an access mode")
	}
	switch {
	case c.GetBlock() != nil:
		return status.Error(codes.InvalidArgument, "block access type is not supported: hostpath volumes are directories")
	case c.GetMount() == nil:
		return status.Error(codes.InvalidArgument, "volume capability needs an access type (mount)")
	}
	return nil
}

func controllerCap(t csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
	return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}}
}

func nodeCap(t csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
	return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}}
}

// required checks that each named field (name, value pairs) is set; the
// first empty one is InvalidArgument.
func required(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i+1] == "" {
			return status.Errorf(codes.InvalidArgument, "%s is required", fields[i])
		}
	}
	return nil
}

// lookup returns a volume or NotFound; callers hold d.mu.
func (d *Driver) lookup(id string) (*volume, error) {
	v, ok := d.state.Volumes[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", id)
	}
	return v, nil
}
