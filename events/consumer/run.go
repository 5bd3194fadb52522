package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/codec"
)

// Run fills the cache and keeps it current until ctx ends; it returns nil
// then. It takes a snapshot (a paginated LIST through the apiserver, at
// one revision R) and tails the log from R+1 with an ordered consumer
// filtered on the server. If the tail breaks, it resumes from the last
// event read; if the log no longer holds that position (events.ErrTooOld),
// it takes a new snapshot and applies the difference. Failures are retried
// with back-off, never returned.
//
// Run may be called again after it returned: the cache resumes from where
// it stopped. It returns ErrRunning if the cache already runs.
func (c *Cache[T]) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return fmt.Errorf("consumer: cache %s: %w", c.cfg.Resource.Resource, ErrRunning)
	}
	defer c.running.Store(false)
	rc, err := listClient(c.cfg.Config)
	if err != nil {
		return err
	}
	bo := backoff{min: 100 * time.Millisecond, max: 10 * time.Second}
	for ctx.Err() == nil {
		want, gen := c.wanted()
		changed := gen != c.followingGen
		if c.resume != 0 && !c.following.covers(want) {
			// New partitions: their objects are not in the cache yet.
			c.resume = 0
		}
		// A snapshot after the first finds the changes the tail did not
		// deliver to the objects the cache followed before it (see gap).
		gap := gapSet{on: c.HasSynced(), followed: c.following}
		c.following, c.followingGen = want, gen
		if c.resume == 0 {
			rev, err := c.snapshot(ctx, rc, gap)
			if err != nil {
				if ctx.Err() == nil {
					c.log.Warn("snapshot failed", "err", err)
					bo.wait(ctx)
				}
				continue
			}
			c.resume = rev + 1
		} else if changed {
			c.forget(want)
		}
		started := time.Now()
		err := c.tailUntilKicked(ctx)
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, errKicked):
		case errors.Is(err, events.ErrTooOld):
			c.log.Info("log no longer holds the cache's position, taking a new snapshot", "from", int64(c.resume), "err", err)
			c.resume = 0
		default:
			c.log.Warn("tail broke, resuming", "from", int64(c.resume), "err", err)
			if time.Since(started) > time.Minute {
				bo.reset()
			}
			bo.wait(ctx)
		}
	}
	return nil
}

// followState is the partition generation a cache follows and its
// subject filters.
type followState struct {
	gen     uint64
	filters []string
}

// errKicked ends a tail that SetPartitions interrupted.
var errKicked = errors.New("consumer: partitions changed")

// tailUntilKicked is tail, ended early (with errKicked) by SetPartitions.
func (c *Cache[T]) tailUntilKicked(ctx context.Context) error {
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-c.kick:
			cancel(errKicked)
		case <-tctx.Done():
		}
	}()
	err := c.tail(tctx)
	if context.Cause(tctx) == errKicked {
		return errKicked
	}
	return err
}

// snapshot lists the resource through the apiserver, page by page at the
// first page's revision, and installs the result.
func (c *Cache[T]) snapshot(ctx context.Context, rc *rest.RESTClient, gap gapSet) (events.Revision, error) {
	r := c.cfg.Resource
	segs := []string{"/apis", r.Group, r.Version}
	if r.Group == "" {
		segs = []string{"/api", r.Version}
	}
	if c.cfg.Namespace != "" {
		segs = append(segs, "namespaces", c.cfg.Namespace)
	}
	p := path.Join(append(segs, r.Resource)...)
	var (
		objs []T
		cont string
		rev  events.Revision
	)
	for {
		req := rc.Get().AbsPath(p).Param("limit", fmt.Sprint(c.cfg.PageSize))
		if cont != "" {
			req = req.Param("continue", cont)
		}
		if c.cfg.Node != "" {
			req = req.Param("fieldSelector", "spec.nodeName="+c.cfg.Node)
		}
		if c.cfg.Name != "" {
			req = req.Param("fieldSelector", "metadata.name="+c.cfg.Name)
		}
		body, err := req.Do(ctx).Raw()
		if err != nil {
			return 0, fmt.Errorf("consumer: list %s: %w", p, err)
		}
		var page struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items []json.RawMessage `json:"items"`
		}
		if err := codec.Unmarshal(body, &page); err != nil {
			return 0, fmt.Errorf("consumer: list %s: %w", p, err)
		}
		if rev == 0 {
			if rev, err = events.ParseRevision(page.Metadata.ResourceVersion); err != nil {
				return 0, fmt.Errorf("consumer: list %s: %w", p, err)
			}
		}
		kind := strings.TrimSuffix(page.Kind, "List")
		for _, raw := range page.Items {
			obj := c.newObj()
			if err := decodeInto(raw, obj); err != nil {
				return 0, fmt.Errorf("consumer: list %s: %w", p, err)
			}
			if obj.GetObjectKind().GroupVersionKind().Kind == "" {
				obj.GetObjectKind().SetGroupVersionKind(r.GroupVersion().WithKind(kind))
			}
			if c.following.keeps(obj) {
				objs = append(objs, obj)
			}
		}
		if cont = page.Metadata.Continue; cont == "" {
			break
		}
	}
	c.replace(ctx, objs, rev, gap)
	c.lists.Add(1)
	c.log.Debug("snapshot", "objects", len(objs), "revision", int64(rev))
	return rev, nil
}

// tail reads the log from c.resume until ctx ends or the consumer fails,
// moving c.resume along.
func (c *Cache[T]) tail(ctx context.Context) error {
	js := c.cfg.JS
	ro := events.ReadOptions{Stream: c.stream, Filters: c.following.filters(c.filter), Follow: true}
	seq, err := events.SeekRevision(ctx, js, c.stream, c.resume)
	switch {
	case err == nil:
		ro.FromSeq = seq
	case errors.Is(err, events.ErrTooOld) && c.stream == events.LeaseStream:
		// The lease stream keeps the latest event of every lease: what it
		// dropped was superseded by what it keeps, so reading all of it
		// (older events are skipped) loses nothing.
	default:
		return fmt.Errorf("consumer: tail: %w", err)
	}
	c.seq.Store(max(ro.FromSeq, 1) - 1)
	c.followed.Store(&followState{gen: c.followingGen, filters: ro.Filters})
	r, err := events.NewReader(ctx, js, ro)
	if err != nil {
		return fmt.Errorf("consumer: tail: %w", err)
	}
	defer r.Stop()
	for {
		m, err := r.Next(ctx)
		if err != nil {
			return fmt.Errorf("consumer: tail: %w", err)
		}
		ev, obj, decoded, err := c.decodeEvent(m.Data)
		if err != nil {
			c.log.Error("undecodable event", "subject", m.Subject, "err", err)
			continue
		}
		c.apply(ev, obj, decoded)
		c.seq.Store(m.Seq)
		// Resume at this revision, not after it: a transaction that changed
		// several objects has several events with one revision.
		c.resume = ev.Revision
	}
}

// listClient is a REST client for raw LIST requests.
func listClient(cfg *rest.Config) (*rest.RESTClient, error) {
	rc := rest.CopyConfig(cfg)
	rc.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	cl, err := rest.UnversionedRESTClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("consumer: rest client: %w", err)
	}
	return cl, nil
}

// decodeInto decodes an object's JSON into obj.
func decodeInto(raw []byte, obj Object) error {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		// Unstructured's own decoder insists on a kind; list items may have
		// none. utiljson keeps integers as int64, as Unstructured expects.
		m := map[string]any{}
		if err := utiljson.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("decode object: %w", err)
		}
		u.Object = m
		return nil
	}
	if err := codec.Unmarshal(raw, obj); err != nil {
		return fmt.Errorf("decode object: %w", err)
	}
	return nil
}

// backoff is a capped exponential delay.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) wait(ctx context.Context) {
	if b.cur == 0 {
		b.cur = b.min
	}
	t := time.NewTimer(b.cur)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	b.cur = min(2*b.cur, b.max)
}

func (b *backoff) reset() { b.cur = 0 }

// WaitForLog returns once the cache has applied every event its filter
// selects that is on the log now: it reads the stream sequence of the last
// such event and waits until the tail has passed it. A replica that takes
// over keys from another calls it so it acts on everything the other wrote.
// After SetPartitions, it first waits until the cache follows the new
// partitions (and has their snapshot).
func (c *Cache[T]) WaitForLog(ctx context.Context) error {
	if err := c.WaitForSync(ctx); err != nil {
		return err
	}
	_, gen := c.wanted()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	tick := func() error {
		select {
		case <-ctx.Done():
			return fmt.Errorf("consumer: wait for %s log: %w", c.cfg.Resource.Resource, ctx.Err())
		case <-t.C:
			return nil
		}
	}
	f := c.followed.Load()
	for ; f == nil || f.gen < gen; f = c.followed.Load() {
		if err := tick(); err != nil {
			return err
		}
	}
	var last uint64
	for b := (backoff{min: 100 * time.Millisecond, max: 5 * time.Second}); ; {
		var err error
		if last, err = c.lastSeq(ctx, f.filters); err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("consumer: wait for log: %w", err)
		}
		// JetStream's API can time out for a while (a stream whose
		// replicas change, a meta leader being elected, a loaded
		// machine): keep asking until ctx ends, as a wait should.
		c.log.Warn("wait for log: reading the log's end failed; retrying", "err", err)
		if b.wait(ctx); ctx.Err() != nil {
			return fmt.Errorf("consumer: wait for log: %w", err)
		}
	}
	for c.seq.Load() < last {
		if err := tick(); err != nil {
			return err
		}
	}
	return nil
}

// lastSeq is the stream sequence of the last event on the log that one
// of filters selects (0 without any).
func (c *Cache[T]) lastSeq(ctx context.Context, filters []string) (uint64, error) {
	s, err := c.cfg.JS.Stream(ctx, c.stream)
	if err != nil {
		return 0, err
	}
	var last uint64
	for _, filter := range filters {
		m, err := s.GetLastMsgForSubject(ctx, filter)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return 0, err
		default:
			last = max(last, m.Sequence)
		}
	}
	return last, nil
}

// envelope decodes an event and its object in one pass: the outer Object
// field shadows events.Event's raw one.
type envelope[T Object] struct {
	events.Event
	Object T `json:"object"`
}

// decodeEvent decodes a message. Typed objects are decoded together with
// the envelope; unstructured ones (which need their own decoder) later by
// apply.
func (c *Cache[T]) decodeEvent(data []byte) (*events.Event, T, bool, error) {
	var zero T
	if c.unstructured {
		var ev events.Event
		if err := codec.Unmarshal(data, &ev); err != nil {
			return nil, zero, false, err
		}
		return &ev, zero, false, nil
	}
	env := envelope[T]{Object: c.newObj()}
	if err := codec.Unmarshal(data, &env); err != nil {
		return nil, zero, false, err
	}
	ev := env.Event
	if v := reflect.ValueOf(env.Object); !v.IsValid() || v.IsNil() {
		// "object": null (or missing) leaves an empty object, as decodeInto
		// does.
		env.Object = c.newObj()
	}
	return &ev, env.Object, true, nil
}
