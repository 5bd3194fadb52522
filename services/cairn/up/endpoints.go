package up

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// EndpointsFile, in the data directory, tells other cairn commands (events,
// timeline, ...) where the running cluster's etcd and NATS are. It is
// written once the control plane is ready and removed on a clean stop.
const EndpointsFile = "endpoints.json"

// Endpoints locate a running cluster's servers.
type Endpoints struct {
	Etcd      []string `json:"etcd"`
	NATS      string   `json:"nats"`
	APIServer string   `json:"apiserver"`
}

// WriteEndpoints writes the endpoints file atomically.
func WriteEndpoints(path string, ep Endpoints) error {
	b, err := json.MarshalIndent(ep, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("up: endpoints: %w", err)
	}
	return os.Rename(tmp, path)
}

// ReadEndpoints reads an endpoints file.
func ReadEndpoints(path string) (Endpoints, error) {
	var ep Endpoints
	b, err := os.ReadFile(path)
	if err != nil {
		return ep, err
	}
	if err := json.Unmarshal(b, &ep); err != nil {
		return ep, fmt.Errorf("up: endpoints %s: %w", path, err)
	}
	return ep, nil
}
