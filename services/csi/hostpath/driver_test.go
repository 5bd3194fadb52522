package hostpath_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-dev/cairn/services/csi/csiclient"
	"github.com/cairn-dev/cairn/services/csi/hostpath"
)

var rwo = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

func dial(t *testing.T, endpoint string) *csiclient.Client {
	t.Helper()
	c, err := csiclient.Dial(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func create(t *testing.T, c *csiclient.Client, name string, size int64) *csi.Volume {
	t.Helper()
	resp, err := c.Controller.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: name, VolumeCapabilities: []*csi.VolumeCapability{rwo},
		CapacityRange: &csi.CapacityRange{RequiredBytes: size},
	})
	if err != nil {
		t.Fatalf("CreateVolume %s: %v", name, err)
	}
	return resp.GetVolume()
}

func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("code = %v (%v), want %v", got, err, want)
	}
}

// TestCapacity: volumes reserve the configured capacity; GetCapacity
// reports what is left; a volume that does not fit now is
// ResourceExhausted, one larger than the node is OutOfRange; expansion is
// accounted too; other nodes' topology has no capacity here.
func TestCapacity(t *testing.T) {
	ctx := context.Background()
	c := dial(t, startDriver(t, t.TempDir(), 100<<20, 0))
	v := create(t, c, "a", 60<<20)
	if got := v.GetAccessibleTopology()[0].GetSegments()[hostpath.TopologyKey]; got != testNode {
		t.Fatalf("topology = %q, want %q", got, testNode)
	}
	capacity, err := c.Controller.GetCapacity(ctx, &csi.GetCapacityRequest{})
	if err != nil || capacity.GetAvailableCapacity() != 40<<20 {
		t.Fatalf("GetCapacity = %v, %v; want %d", capacity.GetAvailableCapacity(), err, 40<<20)
	}
	_, err = c.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "b", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 50 << 20}})
	wantCode(t, err, codes.ResourceExhausted)
	_, err = c.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "c", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: 200 << 20}})
	wantCode(t, err, codes.OutOfRange)
	_, err = c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 120 << 20}})
	wantCode(t, err, codes.OutOfRange)
	exp, err := c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 90 << 20}})
	if err != nil || exp.GetCapacityBytes() != 90<<20 {
		t.Fatalf("expand = %v, %v", exp, err)
	}
	other, err := c.Controller.GetCapacity(ctx, &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: map[string]string{hostpath.TopologyKey: "node-b"}}})
	if err != nil || other.GetAvailableCapacity() != 0 {
		t.Fatalf("GetCapacity on node-b = %v, %v; want 0", other, err)
	}
	_, err = c.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "d", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{hostpath.TopologyKey: "node-b"}}}},
	})
	wantCode(t, err, codes.ResourceExhausted)
}

// publish stages and publishes a volume under dir and returns the target.
func publish(t *testing.T, c *csiclient.Client, id, dir string, readOnly bool) string {
	t.Helper()
	ctx := context.Background()
	staging := filepath.Join(dir, "staging-"+id)
	if err := os.MkdirAll(staging, 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: rwo}); err != nil {
		t.Fatalf("stage: %v", err)
	}
	target := filepath.Join(dir, "target-"+id)
	if _, err := c.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo, Readonly: readOnly}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	return target
}

// TestRestartKeepsVolumes: a restarted driver (same state directory) keeps
// its volumes, their data, their publications and snapshots; a restore from
// a snapshot has the data of the time it was taken.
func TestRestartKeepsVolumes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("publishing bind-mounts: run as root")
	}
	ctx := context.Background()
	dir := t.TempDir()
	sub := filepath.Join(dir, "first")
	c := dial(t, startDriver(t, sub, 0, 0))
	v := create(t, c, "data", 1<<20)
	target := publish(t, c, v.GetVolumeId(), dir, false)
	if err := os.WriteFile(filepath.Join(target, "f"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := c.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: v.GetVolumeId()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "f"), []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}

	// A second driver on the same state, as after a restart (the first one
	// is still serving on its own socket, which does not matter: the state
	// file is what is read).
	c2 := dial(t, startDriverState(t, filepath.Join(dir, "second.sock"), filepath.Join(sub, "state")))
	list, err := c2.Controller.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil || len(list.GetEntries()) != 1 || list.GetEntries()[0].GetVolume().GetVolumeId() != v.GetVolumeId() {
		t.Fatalf("ListVolumes after restart = %v, %v", list, err)
	}
	// Publishing at the same target again is idempotent: the driver knows it.
	if _, err := c2.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: v.GetVolumeId(), StagingTargetPath: filepath.Join(dir, "staging-"+v.GetVolumeId()), TargetPath: target, VolumeCapability: rwo}); err != nil {
		t.Fatalf("publish after restart: %v", err)
	}
	restored, err := c2.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "restored", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rt := publish(t, c2, restored.GetVolume().GetVolumeId(), dir, true)
	b, err := os.ReadFile(filepath.Join(rt, "f"))
	if err != nil || string(b) != "one" {
		t.Fatalf("restored file = %q, %v; want one", b, err)
	}
	// Read-only publication refuses writes.
	err = os.WriteFile(filepath.Join(rt, "g"), []byte("x"), 0o644)
	if !errors.Is(err, unix.EROFS) {
		t.Fatalf("write to a read-only publication: %v, want EROFS", err)
	}
	// In use: DeleteVolume refuses; after unpublish and unstage it goes.
	_, err = c2.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.GetVolumeId()})
	wantCode(t, err, codes.FailedPrecondition)
	for _, id := range []string{v.GetVolumeId(), restored.GetVolume().GetVolumeId()} {
		if _, err := c2.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: filepath.Join(dir, "target-"+id)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c2.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: filepath.Join(dir, "staging-"+id)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c2.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(sub, "state", "volumes", v.GetVolumeId())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("volume directory after delete: %v", err)
	}
}

// TestEphemeral: an inline volume is made by NodePublishVolume and deleted
// by its NodeUnpublishVolume.
func TestEphemeral(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("publishing bind-mounts: run as root")
	}
	ctx := context.Background()
	dir := t.TempDir()
	c := dial(t, startDriver(t, dir, 10<<20, 0))
	target := filepath.Join(dir, "pod", "mount")
	req := &csi.NodePublishVolumeRequest{
		VolumeId: "csi-0123", TargetPath: target, VolumeCapability: rwo,
		VolumeContext: map[string]string{"csi.storage.k8s.io/ephemeral": "true", "size": "2Mi"},
	}
	if _, err := c.Node.NodePublishVolume(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	capacity, _ := c.Controller.GetCapacity(ctx, &csi.GetCapacityRequest{})
	if capacity.GetAvailableCapacity() != 8<<20 {
		t.Fatalf("capacity with an ephemeral volume = %d, want %d", capacity.GetAvailableCapacity(), 8<<20)
	}
	if _, err := c.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-0123", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("target after unpublish: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "volumes", "csi-0123")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ephemeral volume after unpublish: %v", err)
	}
}

// TestExpand: ControllerExpandVolume grows the reservation and asks for
// node expansion; the published volume presents its old size
// (NodeGetVolumeStats) until NodeExpandVolume at its target grows it.
// Node expansion beyond the reservation is OutOfRange, at a path where
// the volume is not published is NotFound.
func TestExpand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("publishing bind-mounts: run as root")
	}
	ctx := context.Background()
	dir := t.TempDir()
	c := dial(t, startDriver(t, dir, 100<<20, 0))
	v := create(t, c, "grow", 10<<20)
	target := publish(t, c, v.GetVolumeId(), dir, false)
	t.Cleanup(func() { // a failure's mounts go before the directory
		_, _ = c.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.GetVolumeId(), TargetPath: target})
		_, _ = c.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.GetVolumeId(), StagingTargetPath: filepath.Join(dir, "staging-"+v.GetVolumeId())})
	})
	total := func() int64 {
		t.Helper()
		st, err := c.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: v.GetVolumeId(), VolumePath: target})
		if err != nil {
			t.Fatal(err)
		}
		return st.GetUsage()[0].GetTotal()
	}
	expand := func(node bool) {
		t.Helper()
		exp, err := c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 30 << 20}})
		if err != nil || exp.GetCapacityBytes() != 30<<20 || exp.GetNodeExpansionRequired() != node {
			t.Fatalf("ControllerExpandVolume = %v, %v; want 30Mi with node expansion required %v", exp, err, node)
		}
	}
	expand(true)
	expand(true) // a retry still owes the node its expansion
	if got := total(); got != 10<<20 {
		t.Fatalf("size on the node before NodeExpandVolume = %d, want %d", got, 10<<20)
	}
	_, err := c.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: v.GetVolumeId(), VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: 40 << 20}})
	wantCode(t, err, codes.OutOfRange)
	_, err = c.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: v.GetVolumeId(), VolumePath: filepath.Join(dir, "elsewhere"), CapacityRange: &csi.CapacityRange{RequiredBytes: 30 << 20}})
	wantCode(t, err, codes.NotFound)
	for range 2 { // idempotent
		ne, err := c.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: v.GetVolumeId(), VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: 30 << 20}, VolumeCapability: rwo})
		if err != nil || ne.GetCapacityBytes() != 30<<20 {
			t.Fatalf("NodeExpandVolume = %v, %v; want 30Mi", ne, err)
		}
	}
	if got := total(); got != 30<<20 {
		t.Errorf("size on the node after NodeExpandVolume = %d, want %d", got, 30<<20)
	}
	expand(false) // once the node has grown, nothing is owed
	if _, err := c.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.GetVolumeId(), TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.GetVolumeId(), StagingTargetPath: filepath.Join(dir, "staging-"+v.GetVolumeId())}); err != nil {
		t.Fatal(err)
	}
}
