// Package atomicfile replaces a file's contents so that a reader, or a
// crash, sees the old contents or the new ones, never an empty or
// half-written file.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes b to path with mode perm through a temporary file in the
// same directory (created if missing), synced, then renamed over path.
func Write(path string, b []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
