package namespace

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// WaitForLog waits until the cache has applied everything on the log now.
func (c *Controller) WaitForLog(ctx context.Context) error {
	if err := c.cache.WaitForLog(ctx); err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	return nil
}

// Resync queues, with the given cause (the replica's takeover), every namespace; Owns drops those of other replicas.
func (c *Controller) Resync(cause *events.Event) {
	for _, ns := range c.cache.List(labels.Everything()) {
		c.ctrl.Enqueue(consumer.KeyOf(ns), cause)
	}
}
