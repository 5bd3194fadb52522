// Package hostpathtest runs the real CSI driver hostpath.csi.cairn.dev for
// one test (or benchmark), on a unix socket in a temporary directory, and
// stops it when the test ends.
package hostpathtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/cairn-dev/cairn/services/csi/csiclient"
	"github.com/cairn-dev/cairn/services/csi/hostpath"
)

// Driver is a running driver.
type Driver struct {
	// Endpoint is unix:///path of its socket.
	Endpoint string
	// StateDir holds its volumes and state.json.
	StateDir string
	// Client is connected to it (closed when the test ends).
	Client *csiclient.Client
}

// Start serves a driver for node nodeID with volumes capped at capacity
// bytes in total (0: no cap) until t ends, and returns it once it answers
// Probe. The socket lives in a short directory of its own: unix socket
// paths are limited to 108 bytes, which t.TempDir() can exceed.
func Start(t testing.TB, nodeID string, capacity int64) *Driver {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	d := &Driver{Endpoint: "unix://" + filepath.Join(sockDir, "csi.sock"), StateDir: filepath.Join(t.TempDir(), "state")}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- hostpath.Run(ctx, hostpath.Config{Endpoint: d.Endpoint, NodeID: nodeID, StateDir: d.StateDir, Capacity: capacity})
	}()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("csi driver: %v", err)
		}
	}
	if d.Client, err = csiclient.Dial(d.Endpoint); err != nil {
		stop()
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := d.Client.WaitReady(wctx, 20*time.Millisecond); err != nil {
		d.Client.Close()
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Client.Close()
		stop()
	})
	return d
}

// Volumes are the volumes the driver holds, by id, with the ids of the
// nodes each is published (attached) to.
func (d *Driver) Volumes(t testing.TB) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string][]string{}
	var token string
	for {
		resp, err := d.Client.Controller.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: token})
		if err != nil {
			t.Fatalf("ListVolumes: %v", err)
		}
		for _, e := range resp.GetEntries() {
			out[e.GetVolume().GetVolumeId()] = e.GetStatus().GetPublishedNodeIds()
		}
		if token = resp.GetNextToken(); token == "" {
			return out
		}
	}
}
