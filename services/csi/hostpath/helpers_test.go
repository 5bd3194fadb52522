package hostpath_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/csi/csiclient"
	"github.com/cairn-dev/cairn/services/csi/hostpath"
)

const testNode = "node-a"

// startDriver serves a driver with state in dir/state on dir/csi.sock
// until the test ends, and returns its endpoint once it answers Probe.
func startDriver(t *testing.T, dir string, capacity, maxVolumes int64) string {
	t.Helper()
	return serve(t, hostpath.Config{
		Endpoint: "unix://" + filepath.Join(dir, "csi.sock"), NodeID: testNode, StateDir: filepath.Join(dir, "state"),
		Capacity: capacity, MaxVolumesPerNode: maxVolumes,
	})
}

// startDriverState serves a driver on sock with an existing state dir.
func startDriverState(t *testing.T, sock, stateDir string) string {
	t.Helper()
	return serve(t, hostpath.Config{Endpoint: "unix://" + sock, NodeID: testNode, StateDir: stateDir})
}

func serve(t *testing.T, cfg hostpath.Config) string {
	t.Helper()
	endpoint := cfg.Endpoint
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- hostpath.Run(ctx, cfg)
	}()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("driver: %v", err)
		}
	}
	c, err := csiclient.Dial(endpoint)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	defer c.Close()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := c.WaitReady(wctx, 20*time.Millisecond); err != nil {
		stop()
		select {
		case err := <-done:
			t.Fatalf("driver exited: %v", err)
		default:
		}
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return endpoint
}
