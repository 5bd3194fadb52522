package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer/shard"
)

// markerNamespace holds the catch-up marker Leases.
const markerNamespace = "kube-system"

// catchUp is what a sharded Manager does after it acquired a partition and
// before it uses it (shard.Config.CatchUp): follow the new partitions,
// write its marker (ShardOptions.Marker) and wait until its caches hold
// everything up to the marker's revision, so that it acts on everything
// the previous owner wrote.
type catchUp struct {
	m      *Manager
	marker string
	ttl    time.Duration

	// mu serialises catch-ups; caughtUpFrom is when the last completed
	// one started: it covers every partition acquired before.
	mu           sync.Mutex
	caughtUpFrom time.Time
	// takeover is the event of the marker write of the last catch-up: the
	// cause of the reconciles a takeover queues.
	takeover atomic.Pointer[events.Event]
}

func (c *catchUp) cause() *events.Event { return c.takeover.Load() }

func (c *catchUp) run(ctx context.Context) error {
	asked := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.caughtUpFrom.Before(asked) {
		return nil
	}
	started := time.Now()
	if err := c.do(ctx); err != nil {
		return err
	}
	c.caughtUpFrom = started
	return nil
}

func (c *catchUp) do(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c.m.followPartitions()
	if c.marker != "" {
		rev, err := c.mark(ctx)
		if err != nil {
			return err
		}
		if err := events.WaitPublished(ctx, c.m.opts.JS, rev); err != nil {
			return err
		}
		if ev, err := c.markerEvent(ctx, rev); err != nil {
			c.m.log.Warn("consumer: takeover event not found; reconciles it queues have no cause", "err", err)
		} else {
			c.takeover.Store(ev)
		}
	}
	return c.m.WaitForLog(ctx)
}

func (c *catchUp) markerName() string {
	return c.marker + strings.ToLower(strings.ReplaceAll(c.m.sharder.Identity(), "_", "-"))
}

// mark writes this replica's Lease and returns the revision of the write.
func (c *catchUp) mark(ctx context.Context) (events.Revision, error) {
	leases := c.m.client.CoordinationV1().Leases(markerNamespace)
	name := c.markerName()
	now := metav1.NewMicroTime(time.Now())
	holder := c.m.sharder.Identity()
	ttl := c.ttl
	if ttl <= 0 {
		ttl = shard.DefaultLeaseTTL
	}
	secs := int32(ttl / time.Second)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: markerNamespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now, LeaseDurationSeconds: &secs},
		}, metav1.CreateOptions{})
	case err == nil:
		l.Spec.RenewTime = &now
		l.Spec.HolderIdentity = &holder
		l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return 0, fmt.Errorf("consumer: marker lease: %w", err)
	}
	return events.ParseRevision(l.ResourceVersion)
}

// markerEvent reads the event of this replica's marker write at rev from
// the lease stream.
func (c *catchUp) markerEvent(ctx context.Context, rev events.Revision) (*events.Event, error) {
	s, err := c.m.opts.JS.Stream(ctx, events.LeaseStream)
	if err != nil {
		return nil, err
	}
	subj := events.Filter("coordination.k8s.io", "leases", "", markerNamespace, c.markerName())
	msg, err := s.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return nil, err
	}
	var ev events.Event
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		return nil, err
	}
	if ev.Revision < rev {
		return nil, fmt.Errorf("consumer: marker event at %d, want %d", ev.Revision, rev)
	}
	ev.Object = nil
	return &ev, nil
}

// followPartitions points every partitioned cache at the objects of the
// keys this replica leases (see SubjectPartitions): the other replicas'
// objects are not even sent to it.
func (m *Manager) followPartitions() {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := m.subjectPartitionsLocked()
	for _, e := range m.order {
		if e.partitioned {
			e.c.SetPartitions(parts)
		}
	}
}

// subjectPartitionsLocked are the subject partitions of the shard's
// leases; called with mu held.
func (m *Manager) subjectPartitionsLocked() []int {
	return SubjectPartitions(m.sharder.Leased(), m.sharder.Partitions())
}

// SubjectPartitions are the subject partitions (events.Partition) of the
// keys in shard partitions leased out of n: t such that t % n is leased,
// since both hash keys with events.KeyHash. With an n that does not
// divide events.Partitions they do not line up: nil, every object.
func SubjectPartitions(leased []int, n int) []int {
	if n <= 0 || events.Partitions%n != 0 {
		return nil
	}
	parts := []int{}
	for t := range events.Partitions {
		if slices.Contains(leased, t%n) {
			parts = append(parts, t)
		}
	}
	return parts
}
