package storage

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/fit"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// TestLedgerEncoding: a ledger decodes to what was encoded, whatever its
// keys and uids, and ledgers written as JSON by earlier versions decode.
func TestLedgerEncoding(t *testing.T) {
	req := fit.Resources{MilliCPU: 250, Memory: 1 << 30, EphemeralStorage: 5}
	tests := []struct {
		name string
		pods map[string]AllocatedPod
	}{
		{"empty", map[string]AllocatedPod{}},
		{"uuids", map[string]AllocatedPod{
			Key("", "pods", "default", "a"):     {UID: "0b6a1c2e-3f4d-4e5f-8a9b-00000000000a", Requests: req},
			Key("", "pods", "kube-system", "b"): {UID: "ffffffff-0000-4000-8000-123456789abc"},
		}},
		{"other uids", map[string]AllocatedPod{
			Key("", "pods", "default", "upper"): {UID: "0B6A1C2E-3F4D-4E5F-8A9B-00000000000A", Requests: req},
			Key("", "pods", "default", "short"): {UID: "uid-1"},
			Key("", "pods", "default", "none"):  {},
			Key("", "pods", "default", "dash"):  {UID: "0b6a1c2e-3f4d-4e5f-8a9b-00000000000-"},
		}},
		{"a key without the pod prefix", map[string]AllocatedPod{
			Key("", "pods", "default", "a"): {UID: "u", Requests: req},
			"/elsewhere/x":                  {UID: "v", Requests: fit.Resources{MilliCPU: -1}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Allocation{Pods: tt.pods, Revision: 7}
			got, err := DecodeAllocation(EncodeAllocation(in))
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got.Pods, tt.pods) {
				t.Errorf("decoded %v, want %v", got.Pods, tt.pods)
			}
			old, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			got, err = DecodeAllocation(old)
			if err != nil || !maps.Equal(got.Pods, tt.pods) {
				t.Errorf("decoded JSON %s as %v, %v", old, got.Pods, err)
			}
		})
	}
	good := EncodeAllocation(Allocation{Pods: tests[1].pods})
	for name, b := range map[string][]byte{
		"truncated":   good[:len(good)-1],
		"bad version": append([]byte{0, 'A', 9}, good[3:]...),
		"bad json":    []byte(`{"pods":`),
	} {
		if _, err := DecodeAllocation(b); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// TestBindStale: Bind commits only while the pod, the ledger and the node
// are at the revisions it was given (the node's 0: absent); otherwise it
// returns a StaleError holding the current node, ledger and pod revision.
func TestBindStale(t *testing.T) {
	e := embeddedtest.StartEtcd(t)
	s := New(e.Client)
	ctx := context.Background()
	meta := func() *events.WriteMeta { return &events.WriteMeta{ID: "w", Verb: "test"} }
	podKey, nodeKey := Key("", "pods", "default", "p"), Key("", "nodes", "", "n")
	podRev, err := s.Create(ctx, podKey, []byte(`{"v":1}`), meta())
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.ReadNodeState(ctx, "n")
	if err != nil || st.Node.Value != nil || st.Node.Revision != 0 || st.Alloc.Revision != 0 || len(st.Alloc.Pods) != 0 {
		t.Fatalf("state of a node that does not exist: %+v, %v", st, err)
	}
	// The node appears after the read: a binding that assumed it absent fails.
	nodeRev, err := s.Create(ctx, nodeKey, []byte(`{"status":{}}`), meta())
	if err != nil {
		t.Fatal(err)
	}
	a := Allocation{Pods: map[string]AllocatedPod{podKey: {UID: "u", Requests: fit.Resources{MilliCPU: 1}}}}
	_, err = s.Bind(ctx, podKey, []byte(`{"v":2}`), podRev, "n", 0, a, meta())
	var stale *StaleError
	if !errors.As(err, &stale) || !errors.Is(err, ErrConflict) {
		t.Fatalf("bind assuming no node: %v, want a StaleError", err)
	}
	if stale.State.Node.Revision != nodeRev || string(stale.State.Node.Value) != `{"status":{}}` || stale.PodRevision != podRev || stale.State.Alloc.Revision != 0 {
		t.Errorf("stale state %+v pod revision %d; want node at %d, pod at %d, no ledger", stale.State, stale.PodRevision, nodeRev, podRev)
	}
	rev, err := s.Bind(ctx, podKey, []byte(`{"v":2}`), podRev, "n", nodeRev, a, meta())
	if err != nil {
		t.Fatalf("bind: %v", err)
	}
	st, err = s.ReadNodeState(ctx, "n")
	if err != nil || st.Alloc.Revision != rev || !maps.Equal(st.Alloc.Pods, a.Pods) || st.Node.Revision != nodeRev {
		t.Errorf("after bind: %+v, %v; want the ledger at %d", st, err, rev)
	}
	// A stale ledger revision and a stale pod revision.
	_, err = s.Bind(ctx, podKey, []byte(`{"v":3}`), rev, "n", nodeRev, Allocation{Pods: map[string]AllocatedPod{}}, meta())
	if !errors.As(err, &stale) || stale.State.Alloc.Revision != rev || !maps.Equal(stale.State.Alloc.Pods, a.Pods) || stale.PodRevision != rev {
		t.Errorf("bind with a stale ledger: %v; want a StaleError with the ledger at %d", err, rev)
	}
	_, err = s.Bind(ctx, podKey, []byte(`{"v":3}`), podRev, "n", nodeRev, st.Alloc, meta())
	if !errors.As(err, &stale) || stale.PodRevision != rev {
		t.Errorf("bind with a stale pod: %v; want a StaleError with the pod at %d", err, rev)
	}
}
