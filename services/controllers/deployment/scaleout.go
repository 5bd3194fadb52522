package deployment

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// WaitForLog waits until every cache has applied everything on the log
// now; a replica calls it before acting on keys taken over from another.
func (c *Controller) WaitForLog(ctx context.Context) error {
	for _, w := range []interface{ WaitForLog(context.Context) error }{c.deployments, c.rss, c.pods} {
		if err := w.WaitForLog(ctx); err != nil {
			return fmt.Errorf("deployment: %w", err)
		}
	}
	return nil
}

// Resync queues, with the given cause (the replica's takeover), every Deployment; Owns drops those of other replicas.
func (c *Controller) Resync(cause *events.Event) {
	for _, d := range c.deployments.List(labels.Everything()) {
		c.ctrl.Enqueue(consumer.KeyOf(d), cause)
	}
}
