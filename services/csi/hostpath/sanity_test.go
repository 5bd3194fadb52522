package hostpath_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
)

// TestSanity runs the upstream CSI conformance suite (csi-sanity) against
// the driver on its real socket. Its node specs bind-mount, so it needs
// root (CI runs as root).
func TestSanity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("csi-sanity's node specs bind-mount volumes: run as root")
	}
	dir := t.TempDir()
	endpoint := startDriver(t, dir, 1<<40, 16)
	cfg := sanity.NewTestConfig()
	cfg.Address = endpoint
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestNodeVolumeAttachLimit = true
	sanity.Test(t, cfg)
}
