package hostpath

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cairn-dev/cairn/services/atomicfile"
)

// volume is one volume: a directory of the driver.
type volume struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Size int64  `json:"size"`
	// NodeSize is the size the volume presents on the node
	// (NodeGetVolumeStats' total): ControllerExpandVolume grows Size and
	// leaves NodeSize behind until NodeExpandVolume grows it too, as a
	// filesystem waits for its resize after its device grew. 0 is Size.
	NodeSize  int64             `json:"nodeSize,omitempty"`
	Path      string            `json:"path"`
	Ephemeral bool              `json:"ephemeral,omitempty"`
	Context   map[string]string `json:"context,omitempty"`
	// SourceSnapshot and SourceVolume name what the volume was made from.
	SourceSnapshot string    `json:"sourceSnapshot,omitempty"`
	SourceVolume   string    `json:"sourceVolume,omitempty"`
	Created        time.Time `json:"created"`
	// Attached maps a node id to the readonly flag of its
	// ControllerPublishVolume.
	Attached map[string]bool `json:"attached,omitempty"`
	// Staged lists the staging paths (NodeStageVolume).
	Staged []string `json:"staged,omitempty"`
	// Published maps a target path to how it was published.
	Published map[string]publication `json:"published,omitempty"`
}

type publication struct {
	ReadOnly   bool   `json:"readOnly,omitempty"`
	AccessMode string `json:"accessMode"`
}

// snapshot is a tar of a volume's directory.
type snapshot struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	SourceVolumeID string    `json:"sourceVolumeID"`
	Size           int64     `json:"size"`
	Path           string    `json:"path"`
	Created        time.Time `json:"created"`
}

type state struct {
	Volumes   map[string]*volume   `json:"volumes"`
	Snapshots map[string]*snapshot `json:"snapshots"`
}

func loadState(path string) (*state, error) {
	st := &state{Volumes: map[string]*volume{}, Snapshots: map[string]*snapshot{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hostpath: read state: %w", err)
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("hostpath: decode %s: %w", path, err)
	}
	if st.Volumes == nil {
		st.Volumes = map[string]*volume{}
	}
	if st.Snapshots == nil {
		st.Snapshots = map[string]*snapshot{}
	}
	return st, nil
}

// save writes the state to a temporary file, syncs it and renames it over
// path, so a crash leaves the old or the new state, never half of one.
func (s *state) save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

func (s *state) volumeByName(name string) *volume {
	for _, v := range s.Volumes {
		if v.Name == name {
			return v
		}
	}
	return nil
}

func (s *state) snapshotByName(name string) *snapshot {
	for _, sn := range s.Snapshots {
		if sn.Name == name {
			return sn
		}
	}
	return nil
}

// used is the bytes reserved by all volumes.
func (s *state) used() int64 {
	var n int64
	for _, v := range s.Volumes {
		n += v.Size
	}
	return n
}

// nodeSize is the size the node presents.
func (v *volume) nodeSize() int64 {
	if v.NodeSize > 0 {
		return v.NodeSize
	}
	return v.Size
}

func (v *volume) staged(path string) bool {
	for _, p := range v.Staged {
		if p == path {
			return true
		}
	}
	return false
}
