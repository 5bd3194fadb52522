package replicaset

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// WaitForLog waits until both caches have applied everything on the log
// now; a replica calls it before acting on keys taken over from another.
func (c *Controller) WaitForLog(ctx context.Context) error {
	if err := c.rsets.WaitForLog(ctx); err != nil {
		return fmt.Errorf("replicaset: %w", err)
	}
	if err := c.pods.WaitForLog(ctx); err != nil {
		return fmt.Errorf("replicaset: %w", err)
	}
	return nil
}

// Resync queues, with the given cause (the replica's takeover), every ReplicaSet; Owns drops those of other replicas.
func (c *Controller) Resync(cause *events.Event) {
	for _, rs := range c.rsets.List(labels.Everything()) {
		c.ctrl.Enqueue(consumer.KeyOf(rs), cause)
	}
}
