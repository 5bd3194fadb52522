package cli

import (
	"encoding/json"
	"fmt"
	"os"
)

// endpoints is the part of `cairn up`'s endpoints.json replay reads (the
// file services/cairn/up writes; read here rather than imported so that
// up may import this package).
type endpoints struct {
	NATS string `json:"nats"`
}

func readEndpoints(path string) (endpoints, error) {
	var ep endpoints
	b, err := os.ReadFile(path)
	if err != nil {
		return ep, err
	}
	if err := json.Unmarshal(b, &ep); err != nil {
		return ep, fmt.Errorf("endpoints %s: %w", path, err)
	}
	return ep, nil
}
