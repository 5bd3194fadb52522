package hostpath

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ControllerGetCapabilities lists what the controller service does.
func (d *Driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_READONLY,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
		csi.ControllerServiceCapability_RPC_GET_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		caps = append(caps, controllerCap(t))
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// requestedSize picks a volume's size from a capacity range: required
// bytes, else the default size capped by the limit.
func requestedSize(r *csi.CapacityRange) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || lim < 0 {
		return 0, status.Error(codes.InvalidArgument, "capacity range must not be negative")
	}
	if lim > 0 && lim < req {
		return 0, status.Errorf(codes.InvalidArgument, "capacity range: limit %d is below required %d", lim, req)
	}
	switch {
	case req > 0:
		return req, nil
	case lim > 0 && lim < defaultVolumeSize:
		return lim, nil
	}
	return defaultVolumeSize, nil
}

// fits reports whether size is within the range.
func fits(size int64, r *csi.CapacityRange) bool {
	return size >= r.GetRequiredBytes() && (r.GetLimitBytes() == 0 || size <= r.GetLimitBytes())
}

// reserve checks that extra more bytes fit in the capacity: OutOfRange
// when the volume could never fit, ResourceExhausted when it does not fit
// now (external-provisioner then reschedules a WaitForFirstConsumer claim).
func (d *Driver) reserve(size, extra int64) error {
	if d.cfg.Capacity == 0 {
		return nil
	}
	if size > d.cfg.Capacity {
		return status.Errorf(codes.OutOfRange, "requested %d bytes exceeds the node's capacity of %d bytes", size, d.cfg.Capacity)
	}
	if used := d.state.used(); used+extra > d.cfg.Capacity {
		return status.Errorf(codes.ResourceExhausted, "insufficient capacity: %d bytes requested, %d of %d bytes free", extra, d.cfg.Capacity-used, d.cfg.Capacity)
	}
	return nil
}

// accessible reports whether topology requirements admit this node; no
// requirements admit every node.
func (d *Driver) accessible(req *csi.TopologyRequirement) bool {
	tops := append(append([]*csi.Topology{}, req.GetRequisite()...), req.GetPreferred()...)
	if len(tops) == 0 {
		return true
	}
	for _, t := range tops {
		if v, ok := t.GetSegments()[TopologyKey]; ok && v == d.cfg.NodeID {
			return true
		}
	}
	return false
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// CreateVolume makes a directory volume (empty, from a snapshot or a clone
// of a volume). A second call with the same name returns the same volume
// when it is compatible, AlreadyExists when it is not.
func (d *Driver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := required("name", req.GetName()); err != nil {
		return nil, err
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	size, err := requestedSize(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	srcSnap := req.GetVolumeContentSource().GetSnapshot().GetSnapshotId()
	srcVol := req.GetVolumeContentSource().GetVolume().GetVolumeId()
	d.mu.Lock()
	defer d.mu.Unlock()
	if v := d.state.volumeByName(req.GetName()); v != nil {
		if !fits(v.Size, req.GetCapacityRange()) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with size %d, outside the requested range", req.GetName(), v.Size)
		}
		if v.SourceSnapshot != srcSnap || v.SourceVolume != srcVol {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with another content source", req.GetName())
		}
		return &csi.CreateVolumeResponse{Volume: d.csiVolume(v, req.GetVolumeContentSource())}, nil
	}
	if !d.accessible(req.GetAccessibilityRequirements()) {
		return nil, status.Errorf(codes.ResourceExhausted, "volumes can only be created on node %q: the topology requirement does not include it", d.cfg.NodeID)
	}
	var srcSize int64
	switch {
	case srcSnap != "":
		sn, ok := d.state.Snapshots[srcSnap]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "source snapshot %q not found", srcSnap)
		}
		srcSize = sn.Size
	case srcVol != "":
		v, ok := d.state.Volumes[srcVol]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "source volume %q not found", srcVol)
		}
		srcSize = v.Size
	}
	if srcSize > size {
		if req.GetCapacityRange().GetRequiredBytes() > 0 || (req.GetCapacityRange().GetLimitBytes() > 0 && srcSize > req.GetCapacityRange().GetLimitBytes()) {
			return nil, status.Errorf(codes.OutOfRange, "requested %d bytes is smaller than the source's %d bytes", size, srcSize)
		}
		size = srcSize
	}
	if err := d.reserve(size, size); err != nil {
		return nil, err
	}
	id := newID()
	v := &volume{
		ID: id, Name: req.GetName(), Size: size, Path: filepath.Join(d.cfg.StateDir, "volumes", id),
		Context: req.GetParameters(), SourceSnapshot: srcSnap, SourceVolume: srcVol, Created: time.Now().UTC(),
	}
	if err := d.fill(v); err != nil {
		_ = os.RemoveAll(v.Path)
		return nil, err
	}
	d.state.Volumes[id] = v
	if err := d.save(); err != nil {
		delete(d.state.Volumes, id)
		_ = os.RemoveAll(v.Path)
		return nil, err
	}
	d.log.Info("volume created", "volume", id, "name", v.Name, "size", size)
	return &csi.CreateVolumeResponse{Volume: d.csiVolume(v, req.GetVolumeContentSource())}, nil
}

// fill creates v's directory, with its source's content if it has one.
func (d *Driver) fill(v *volume) error {
	if err := os.Mkdir(v.Path, 0o777); err != nil {
		return status.Errorf(codes.Internal, "create volume directory: %v", err)
	}
	// Mkdir's mode is cut by the umask; pods of any user write here, as
	// they do in the upstream driver's directories.
	if err := os.Chmod(v.Path, 0o777); err != nil {
		return status.Errorf(codes.Internal, "create volume directory: %v", err)
	}
	switch {
	case v.SourceSnapshot != "":
		if err := untar(d.state.Snapshots[v.SourceSnapshot].Path, v.Path); err != nil {
			return status.Errorf(codes.Internal, "restore snapshot %s: %v", v.SourceSnapshot, err)
		}
	case v.SourceVolume != "":
		if err := copyTree(d.state.Volumes[v.SourceVolume].Path, v.Path); err != nil {
			return status.Errorf(codes.Internal, "clone volume %s: %v", v.SourceVolume, err)
		}
	}
	return nil
}

func (d *Driver) csiVolume(v *volume, src *csi.VolumeContentSource) *csi.Volume {
	return &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.Size,
		VolumeContext:      v.Context,
		ContentSource:      src,
		AccessibleTopology: []*csi.Topology{d.topology()},
	}
}

// DeleteVolume removes a volume's directory. An unknown id is success (the
// call is idempotent); a volume still attached, staged or published is
// FailedPrecondition, because removing its directory would empty a live
// mount.
func (d *Driver) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := required("volume id", req.GetVolumeId()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[req.GetVolumeId()]
	if !ok {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if len(v.Attached) > 0 || len(v.Staged) > 0 || len(v.Published) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is in use (attached to %d nodes, staged at %d, published at %d paths)", v.ID, len(v.Attached), len(v.Staged), len(v.Published))
	}
	if err := os.RemoveAll(v.Path); err != nil {
		return nil, status.Errorf(codes.Internal, "remove volume directory: %v", err)
	}
	delete(d.state.Volumes, v.ID)
	if err := d.save(); err != nil {
		return nil, err
	}
	d.log.Info("volume deleted", "volume", v.ID, "name", v.Name)
	return &csi.DeleteVolumeResponse{}, nil
}

// ControllerPublishVolume records that the volume is attached to the node.
// Only this driver's node exists: another node id is NotFound, as in the
// upstream driver.
func (d *Driver) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if err := required("volume id", req.GetVolumeId(), "node id", req.GetNodeId()); err != nil {
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
	if req.GetNodeId() != d.cfg.NodeID {
		return nil, status.Errorf(codes.NotFound, "node %q not found: volume %s lives on node %q", req.GetNodeId(), v.ID, d.cfg.NodeID)
	}
	if ro, ok := v.Attached[req.GetNodeId()]; ok {
		if ro != req.GetReadonly() {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s is already published to node %q with readonly=%v", v.ID, req.GetNodeId(), ro)
		}
		return &csi.ControllerPublishVolumeResponse{}, nil
	}
	if max := d.cfg.MaxVolumesPerNode; max > 0 {
		var n int64
		for _, o := range d.state.Volumes {
			if _, ok := o.Attached[req.GetNodeId()]; ok {
				n++
			}
		}
		if n >= max {
			return nil, status.Errorf(codes.ResourceExhausted, "node %q has the maximum of %d volumes attached", req.GetNodeId(), max)
		}
	}
	if v.Attached == nil {
		v.Attached = map[string]bool{}
	}
	v.Attached[req.GetNodeId()] = req.GetReadonly()
	if err := d.save(); err != nil {
		delete(v.Attached, req.GetNodeId())
		return nil, err
	}
	return &csi.ControllerPublishVolumeResponse{}, nil
}

// ControllerUnpublishVolume forgets an attachment (of every node when none
// is named). Unknown volumes and nodes are success: they are not attached.
func (d *Driver) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if err := required("volume id", req.GetVolumeId()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[req.GetVolumeId()]
	if !ok || len(v.Attached) == 0 {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if req.GetNodeId() == "" {
		v.Attached = nil
	} else {
		delete(v.Attached, req.GetNodeId())
	}
	if err := d.save(); err != nil {
		return nil, err
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms the capabilities the driver supports.
func (d *Driver) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := required("volume id", req.GetVolumeId()); err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	d.mu.Lock()
	_, ok := d.state.Volumes[req.GetVolumeId()]
	d.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// page cuts a sorted id list by a starting token (an index, as the
// upstream driver's) and max_entries; a token that is not an index into the
// list is Aborted, as the spec asks.
func page(ids []string, token string, max int32) ([]string, string, error) {
	if max < 0 {
		return nil, "", status.Error(codes.InvalidArgument, "max_entries must not be negative")
	}
	start := 0
	if token != "" {
		n, err := strconv.Atoi(token)
		if err != nil || n < 0 || n > len(ids) {
			return nil, "", status.Errorf(codes.Aborted, "invalid starting token %q", token)
		}
		start = n
	}
	end := len(ids)
	next := ""
	if max > 0 && start+int(max) < end {
		end = start + int(max)
		next = strconv.Itoa(end)
	}
	return ids[start:end], next, nil
}

// ListVolumes lists the volumes (inline ephemeral ones are the node's, not
// the controller's, and are left out), with the nodes each is attached to.
func (d *Driver) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	for id, v := range d.state.Volumes {
		if !v.Ephemeral {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	ids, next, err := page(ids, req.GetStartingToken(), req.GetMaxEntries())
	if err != nil {
		return nil, err
	}
	resp := &csi.ListVolumesResponse{NextToken: next}
	for _, id := range ids {
		v := d.state.Volumes[id]
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{
			Volume: d.csiVolume(v, nil),
			Status: d.volumeStatus(v),
		})
	}
	return resp, nil
}

func (d *Driver) volumeStatus(v *volume) *csi.ListVolumesResponse_VolumeStatus {
	st := &csi.ListVolumesResponse_VolumeStatus{}
	for n := range v.Attached {
		st.PublishedNodeIds = append(st.PublishedNodeIds, n)
	}
	sort.Strings(st.PublishedNodeIds)
	return st
}

// ControllerGetVolume returns one volume and the nodes it is attached to.
func (d *Driver) ControllerGetVolume(ctx context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	if err := required("volume id", req.GetVolumeId()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.lookup(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	st := d.volumeStatus(v)
	return &csi.ControllerGetVolumeResponse{
		Volume: d.csiVolume(v, nil),
		Status: &csi.ControllerGetVolumeResponse_VolumeStatus{PublishedNodeIds: st.PublishedNodeIds},
	}, nil
}

// GetCapacity reports the bytes free for new volumes on this node: the
// configured capacity less what volumes reserve, or, with no configured
// capacity, the state directory's free space. Topology naming another node
// has no capacity here.
func (d *Driver) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	if t := req.GetAccessibleTopology(); t != nil && len(t.GetSegments()) > 0 {
		if t.GetSegments()[TopologyKey] != d.cfg.NodeID {
			return &csi.GetCapacityResponse{AvailableCapacity: 0}, nil
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	avail, err := d.available()
	if err != nil {
		return nil, err
	}
	resp := &csi.GetCapacityResponse{AvailableCapacity: avail}
	if d.cfg.Capacity > 0 {
		resp.MaximumVolumeSize = wrapperspb.Int64(avail)
	}
	return resp, nil
}

func (d *Driver) available() (int64, error) {
	if d.cfg.Capacity > 0 {
		return max(d.cfg.Capacity-d.state.used(), 0), nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(d.cfg.StateDir, &fs); err != nil {
		return 0, status.Errorf(codes.Internal, "statfs: %v", err)
	}
	return int64(fs.Bavail) * int64(fs.Bsize), nil
}

// ControllerExpandVolume grows a volume's reservation. The node still
// presents the old size until NodeExpandVolume, so node expansion is
// required (as the upstream driver answers).
func (d *Driver) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if err := required("volume id", req.GetVolumeId()); err != nil {
		return nil, err
	}
	if req.GetCapacityRange() == nil {
		return nil, status.Error(codes.InvalidArgument, "capacity range is required")
	}
	size, err := requestedSize(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.lookup(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if size <= v.Size {
		// A repeated call (the resizer retrying after its write of the
		// volume lost a conflict) still owes the node its expansion.
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.Size, NodeExpansionRequired: v.nodeSize() < v.Size}, nil
	}
	if err := d.reserve(size, size-v.Size); err != nil {
		return nil, err
	}
	old, oldNode := v.Size, v.NodeSize
	v.NodeSize, v.Size = v.nodeSize(), size
	if err := d.save(); err != nil {
		v.Size, v.NodeSize = old, oldNode
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: size, NodeExpansionRequired: true}, nil
}
