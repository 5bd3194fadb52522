package hostpath

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cairn-dev/cairn/services/csi/mount"
)

// NodeGetCapabilities lists what the node service does.
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		caps = append(caps, nodeCap(t))
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeGetInfo names this node, its topology and its volume limit.
func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             d.cfg.NodeID,
		MaxVolumesPerNode:  d.cfg.MaxVolumesPerNode,
		AccessibleTopology: d.topology(),
	}, nil
}

// NodeStageVolume bind-mounts the volume's directory at the staging path
// (which the CO made). Staging again at the same path is success.
func (d *Driver) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if err := required("volume id", req.GetVolumeId(), "staging target path", req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.lookup(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	path := req.GetStagingTargetPath()
	if v.staged(path) {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	if err := os.MkdirAll(path, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "staging path: %v", err)
	}
	if err := mount.Bind(v.Path, path, false); err != nil {
		return nil, status.Errorf(codes.Internal, "stage: %v", err)
	}
	v.Staged = append(v.Staged, path)
	if err := d.save(); err != nil {
		v.Staged = v.Staged[:len(v.Staged)-1]
		_ = mount.Unmount(path)
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// NodeUnstageVolume unmounts the staging path. A volume not staged there
// is success; an unknown volume is NotFound.
func (d *Driver) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := required("volume id", req.GetVolumeId(), "staging target path", req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.lookup(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	path := req.GetStagingTargetPath()
	if !v.staged(path) {
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	if err := mount.Unmount(path); err != nil {
		return nil, status.Errorf(codes.Internal, "unstage: %v", err)
	}
	kept := v.Staged[:0]
	for _, p := range v.Staged {
		if p != path {
			kept = append(kept, p)
		}
	}
	v.Staged = kept
	if err := d.save(); err != nil {
		return nil, err
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume bind-mounts the staged volume (or, for an inline
// ephemeral volume, a volume made now) at the target path, which the
// driver creates. Read-only when the request or the access mode says so.
func (d *Driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := required("volume id", req.GetVolumeId(), "target path", req.GetTargetPath()); err != nil {
		return nil, err
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	ephemeral := req.GetVolumeContext()[ephemeralKey] == "true"
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[req.GetVolumeId()]
	switch {
	case !ok && ephemeral:
		var err error
		if v, err = d.createEphemeral(req); err != nil {
			return nil, err
		}
	case !ok:
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	case !v.Ephemeral && req.GetStagingTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "staging target path is required")
	case !v.Ephemeral && !v.staged(req.GetStagingTargetPath()):
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", v.ID, req.GetStagingTargetPath())
	}
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	readOnly := req.GetReadonly() || mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY || mode == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	target := req.GetTargetPath()
	if p, ok := v.Published[target]; ok {
		if p.ReadOnly != readOnly {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s is already published at %s with readonly=%v", v.ID, target, p.ReadOnly)
		}
		return &csi.NodePublishVolumeResponse{}, nil
	}
	for other, p := range v.Published {
		if mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER || p.AccessMode == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER.String() {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s has a single-writer access mode and is already published at %s", v.ID, other)
		}
	}
	src := v.Path
	if !v.Ephemeral {
		src = req.GetStagingTargetPath()
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "target path: %v", err)
	}
	if err := mount.Bind(src, target, readOnly); err != nil {
		return nil, status.Errorf(codes.Internal, "publish: %v", err)
	}
	if v.Published == nil {
		v.Published = map[string]publication{}
	}
	v.Published[target] = publication{ReadOnly: readOnly, AccessMode: mode.String()}
	if err := d.save(); err != nil {
		delete(v.Published, target)
		_ = mount.Unmount(target)
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// createEphemeral makes the volume of an inline ephemeral volume, named by
// the kubelet's volume handle; volume_context "size" sets its size.
func (d *Driver) createEphemeral(req *csi.NodePublishVolumeRequest) (*volume, error) {
	size := int64(defaultVolumeSize)
	if s, ok := req.GetVolumeContext()["size"]; ok {
		q, err := resource.ParseQuantity(s)
		if err != nil || q.Value() <= 0 {
			return nil, status.Errorf(codes.InvalidArgument, "volume attribute size %q is not a positive quantity", s)
		}
		size = q.Value()
	}
	if err := d.reserve(size, size); err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	v := &volume{
		ID: id, Name: id, Size: size, Path: filepath.Join(d.cfg.StateDir, "volumes", id),
		Ephemeral: true, Context: req.GetVolumeContext(), Created: time.Now().UTC(),
	}
	if err := d.fill(v); err != nil {
		_ = os.RemoveAll(v.Path)
		return nil, err
	}
	d.state.Volumes[id] = v
	d.log.Info("ephemeral volume created", "volume", id, "size", size)
	return v, nil
}

// NodeUnpublishVolume unmounts the target path and removes it, as the spec
// asks of the driver that made it; the last unpublish of an ephemeral
// volume deletes it. A target not published is success.
func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := required("volume id", req.GetVolumeId(), "target path", req.GetTargetPath()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.lookup(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	target := req.GetTargetPath()
	_, published := v.Published[target]
	if !published {
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	if err := mount.Unmount(target); err != nil {
		return nil, status.Errorf(codes.Internal, "unpublish: %v", err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "remove target path: %v", err)
	}
	delete(v.Published, target)
	if v.Ephemeral && len(v.Published) == 0 {
		if err := os.RemoveAll(v.Path); err != nil {
			return nil, status.Errorf(codes.Internal, "remove ephemeral volume: %v", err)
		}
		delete(d.state.Volumes, v.ID)
		d.log.Info("ephemeral volume deleted", "volume", v.ID)
	}
	if err := d.save(); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports the bytes the volume's files use against its
// size, and the inodes of the filesystem under it.
func (d *Driver) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if err := required("volume id", req.GetVolumeId(), "volume path", req.GetVolumePath()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	v, ok := d.state.Volumes[req.GetVolumeId()]
	var dir string
	var size int64
	if ok {
		dir, size = v.Path, v.nodeSize()
	}
	d.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if _, err := os.Stat(req.GetVolumePath()); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume path %s: %v", req.GetVolumePath(), err)
	}
	used, err := du(dir)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume usage: %v", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(req.GetVolumePath(), &st); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs: %v", err)
	}
	return &csi.NodeGetVolumeStatsResponse{
		Usage: []*csi.VolumeUsage{
			{Unit: csi.VolumeUsage_BYTES, Total: size, Used: used, Available: max(size-used, 0)},
			{Unit: csi.VolumeUsage_INODES, Total: int64(st.Files), Used: int64(st.Files - st.Ffree), Available: int64(st.Ffree)},
		},
	}, nil
}

// du sums the sizes of the regular files under dir.
func du(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// NodeExpandVolume grows the size the volume presents on the node to the
// required bytes (all of Size when none are given), at a path where the
// volume is published or staged. More than ControllerExpandVolume
// reserved is OutOfRange; a smaller size leaves it as it is.
func (d *Driver) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	if err := required("volume id", req.GetVolumeId(), "volume path", req.GetVolumePath()); err != nil {
		return nil, err
	}
	if c := req.GetVolumeCapability(); c != nil {
		if err := checkCapability(c); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.lookup(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	path := req.GetVolumePath()
	if _, published := v.Published[path]; !published && !v.staged(path) {
		return nil, status.Errorf(codes.NotFound, "volume %s is neither published nor staged at %s", v.ID, path)
	}
	want := req.GetCapacityRange().GetRequiredBytes()
	if want == 0 {
		want = v.Size
	}
	if want > v.Size {
		return nil, status.Errorf(codes.OutOfRange, "volume %s has %d bytes reserved, %d requested: expand it through the controller first", v.ID, v.Size, want)
	}
	if lim := req.GetCapacityRange().GetLimitBytes(); lim > 0 && v.nodeSize() > lim {
		return nil, status.Errorf(codes.OutOfRange, "volume %s already presents %d bytes, more than the limit of %d", v.ID, v.nodeSize(), lim)
	}
	if want > v.nodeSize() {
		old := v.NodeSize
		v.NodeSize = want
		if err := d.save(); err != nil {
			v.NodeSize = old
			return nil, err
		}
		d.log.Info("volume expanded on the node", "volume", v.ID, "size", want)
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: v.nodeSize()}, nil
}
