package gc

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// WaitForLog waits until every cache has applied everything on the log
// now. Before Run has discovered the resources there is nothing to wait
// for.
func (c *Controller) WaitForLog(ctx context.Context) error {
	if !c.started.Load() {
		return nil
	}
	for _, r := range c.resources {
		if r.cache == nil {
			continue
		}
		if err := r.cache.WaitForLog(ctx); err != nil {
			return fmt.Errorf("gc: %w", err)
		}
	}
	return nil
}

// Resync queues, with the given cause (the replica's takeover), every object of every resource; Owns drops those of other
// replicas.
func (c *Controller) Resync(cause *events.Event) {
	if !c.started.Load() {
		return
	}
	for _, r := range c.resources {
		if r.cache == nil || r.ctrl == nil {
			continue
		}
		for _, o := range r.cache.List(labels.Everything()) {
			r.ctrl.Enqueue(consumer.KeyOf(o), cause)
		}
	}
}
