// Package endpoints is the file in which `cairn up` tells other cairn
// commands (events, timeline, replay, kubelet, ...) where the running
// cluster's etcd, NATS and apiserver are. It is a leaf package next to the
// embedded servers whose addresses it records, so that the commands and
// the projections (projections/history/cli) read the file without
// importing services/cairn.
package endpoints

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// File is the file's name in the data directory. It is written once the
// control plane is ready and removed on a clean stop.
const File = "endpoints.json"

// Set locates a running cluster's servers.
type Set struct {
	Etcd      []string `json:"etcd"`
	NATS      string   `json:"nats"`
	APIServer string   `json:"apiserver"`
}

// Path is the file's path in dataDir.
func Path(dataDir string) string { return filepath.Join(dataDir, File) }

// Write writes the file atomically.
func Write(path string, s Set) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("endpoints: %w", err)
	}
	return os.Rename(tmp, path)
}

// Read reads the file; a missing file is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func Read(path string) (Set, error) {
	var s Set
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("endpoints %s: %w", path, err)
	}
	return s, nil
}
