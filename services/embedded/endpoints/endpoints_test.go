package endpoints

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestWriteRead: what Write writes, Read reads back (mode 0600, no
// temporary file left); a missing file is fs.ErrNotExist, a corrupt one an
// error naming the file.
func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	want := Set{Etcd: []string{"http://127.0.0.1:2379", "http://127.0.0.1:2380"}, NATS: "nats://127.0.0.1:4222", APIServer: "https://127.0.0.1:6443"}
	if err := Write(Path(dir), want); err != nil {
		t.Fatal(err)
	}
	got, err := Read(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Read = %+v, want %+v", got, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != File {
		t.Errorf("dir holds %v, want only %s", entries, File)
	}
	if info, err := os.Stat(Path(dir)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode: %v, %v; want 0600", info, err)
	}

	if _, err := Read(filepath.Join(t.TempDir(), File)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	bad := filepath.Join(t.TempDir(), File)
	if err := os.WriteFile(bad, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bad); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("corrupt file: %v, want a decode error", err)
	}
}
