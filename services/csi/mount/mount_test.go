package mount_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/services/csi/mount"
)

// TestTmpfs mounts a tmpfs, sees it as a filesystem root (and a plain or
// missing directory as none), and unmounts it.
func TestTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	vol, plain := filepath.Join(dir, "vol"), filepath.Join(dir, "plain")
	for _, d := range []string{vol, plain} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := mount.Tmpfs(vol, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mount.Unmount(vol) })
	tests := []struct {
		path string
		want bool
	}{{vol, true}, {plain, false}, {filepath.Join(dir, "missing"), false}}
	for _, tt := range tests {
		if got, err := mount.IsFilesystemRoot(tt.path); err != nil || got != tt.want {
			t.Errorf("IsFilesystemRoot(%s) = %v, %v; want %v", tt.path, got, err, tt.want)
		}
	}
	if m, err := mount.IsMountPoint(vol); err != nil || !m {
		t.Fatalf("IsMountPoint(%s) = %v, %v after Tmpfs", vol, m, err)
	}
	if err := mount.Unmount(vol); err != nil {
		t.Fatal(err)
	}
	if got, err := mount.IsFilesystemRoot(vol); err != nil || got {
		t.Errorf("IsFilesystemRoot after Unmount = %v, %v", got, err)
	}
}
