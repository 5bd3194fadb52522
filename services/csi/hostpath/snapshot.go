package hostpath

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// CreateSnapshot tars a volume's directory. The same name with the same
// source returns the existing snapshot; with another source it is
// AlreadyExists.
func (d *Driver) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if err := required("name", req.GetName(), "source volume id", req.GetSourceVolumeId()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if sn := d.state.snapshotByName(req.GetName()); sn != nil {
		if sn.SourceVolumeID != req.GetSourceVolumeId() {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %q exists with source volume %s", req.GetName(), sn.SourceVolumeID)
		}
		return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(sn)}, nil
	}
	v, ok := d.state.Volumes[req.GetSourceVolumeId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "source volume %s not found", req.GetSourceVolumeId())
	}
	id := newID()
	sn := &snapshot{
		ID: id, Name: req.GetName(), SourceVolumeID: v.ID, Size: v.Size,
		Path: filepath.Join(d.cfg.StateDir, "snapshots", id+".tar"), Created: time.Now().UTC(),
	}
	if err := tarDir(v.Path, sn.Path); err != nil {
		_ = os.Remove(sn.Path)
		return nil, status.Errorf(codes.Internal, "snapshot volume %s: %v", v.ID, err)
	}
	d.state.Snapshots[id] = sn
	if err := d.save(); err != nil {
		delete(d.state.Snapshots, id)
		_ = os.Remove(sn.Path)
		return nil, err
	}
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(sn)}, nil
}

func csiSnapshot(sn *snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId: sn.ID, SourceVolumeId: sn.SourceVolumeID, SizeBytes: sn.Size,
		CreationTime: timestamppb.New(sn.Created), ReadyToUse: true,
	}
}

// DeleteSnapshot removes a snapshot; an unknown id is success.
func (d *Driver) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if err := required("snapshot id", req.GetSnapshotId()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	sn, ok := d.state.Snapshots[req.GetSnapshotId()]
	if !ok {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	if err := os.Remove(sn.Path); err != nil && !os.IsNotExist(err) {
		return nil, status.Errorf(codes.Internal, "remove snapshot: %v", err)
	}
	delete(d.state.Snapshots, sn.ID)
	if err := d.save(); err != nil {
		return nil, err
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots lists snapshots, filtered by snapshot id or source volume,
// paged like ListVolumes.
func (d *Driver) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	for id, sn := range d.state.Snapshots {
		if req.GetSnapshotId() != "" && id != req.GetSnapshotId() {
			continue
		}
		if req.GetSourceVolumeId() != "" && sn.SourceVolumeID != req.GetSourceVolumeId() {
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	ids, next, err := page(ids, req.GetStartingToken(), req.GetMaxEntries())
	if err != nil {
		return nil, err
	}
	resp := &csi.ListSnapshotsResponse{NextToken: next}
	for _, id := range ids {
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(d.state.Snapshots[id])})
	}
	return resp, nil
}

// GetSnapshot returns one snapshot.
func (d *Driver) GetSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	if err := required("snapshot id", req.GetSnapshotId()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	sn, ok := d.state.Snapshots[req.GetSnapshotId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "snapshot %s not found", req.GetSnapshotId())
	}
	return &csi.GetSnapshotResponse{Snapshot: csiSnapshot(sn)}, nil
}
