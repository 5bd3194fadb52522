package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
)

// mirror keeps an in-memory copy of some resources of one API group the
// way the RBAC caches do (services/apiserver/rbac): a snapshot from etcd
// at one revision, then the log's changes after it through the
// apiserver's watch hub. Only the snapshot (at start, and again when the
// watch ends) reads etcd.
type mirror struct {
	store     *storage.Store
	hub       *watchhub.Hub
	log       *slog.Logger
	group     string
	resources []string
	// load replaces the contents with a snapshot (resource -> raw objects).
	load func(objs map[string][][]byte)
	// apply puts or removes one object after the snapshot.
	apply func(resource string, typ events.Type, raw []byte) error
}

// run fills and follows until ctx ends; synced is called after each
// snapshot. A failed snapshot or an ended watch is retried with a new
// snapshot.
func (m *mirror) run(ctx context.Context, synced func()) {
	for ctx.Err() == nil {
		rev, err := m.snapshot(ctx)
		if err == nil {
			synced()
			err = m.follow(ctx, rev)
		}
		if ctx.Err() != nil {
			return
		}
		m.log.Warn("webhook cache: resnapshot", "group", m.group, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (m *mirror) snapshot(ctx context.Context) (events.Revision, error) {
	prefixes := make([]string, len(m.resources))
	for i, res := range m.resources {
		prefixes[i] = storage.Key(m.group, res, "", "")
	}
	kvs, rev, err := m.store.Snapshot(ctx, prefixes...)
	if err != nil {
		return 0, fmt.Errorf("webhook: %w", err)
	}
	objs := map[string][][]byte{}
	for i, res := range m.resources {
		for _, kv := range kvs[i] {
			objs[res] = append(objs[res], kv.Value)
		}
	}
	m.load(objs)
	return rev, nil
}

func (m *mirror) follow(ctx context.Context, rev events.Revision) error {
	req := watchhub.Request{Group: m.group, From: rev}
	if len(m.resources) == 1 {
		req.Resource = m.resources[0]
	}
	w, err := m.hub.Watch(ctx, req)
	if err != nil {
		return fmt.Errorf("webhook: watch: %w", err)
	}
	defer w.Stop()
	for ev := range w.Events() {
		if err := m.apply(ev.Resource, ev.Type, ev.Object); err != nil {
			m.log.Warn("webhook cache: undecodable event", "resource", ev.Resource, "revision", ev.Revision, "err", err)
		}
	}
	if err := w.Err(); err != nil {
		return fmt.Errorf("webhook: watch: %w", err)
	}
	return errors.New("webhook: watch ended")
}
