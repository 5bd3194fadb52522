package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events"
)

// Sentinel errors. Check them with errors.Is.
var (
	ErrNotFound = errors.New("storage: not found")
	ErrExists   = errors.New("storage: already exists")
	ErrConflict = errors.New("storage: revision conflict")
	// ErrCompacted means the requested revision was compacted away.
	ErrCompacted = errors.New("storage: revision compacted")
)

// KV is one stored object.
type KV struct {
	Key   string
	Value []byte
	// Revision is the key's ModRevision: the object's resourceVersion.
	Revision       events.Revision
	CreateRevision events.Revision
}

// Store is the etcd-backed object store.
type Store struct {
	cli *clientv3.Client

	hookMu    sync.Mutex
	committed atomic.Pointer[[]func(key string, rev events.Revision)]
}

// OnCommit adds fn, called with the key and the revision of every write
// the store commits (Create, Update, Delete, Bind), in the goroutine
// that made it, right after etcd answers. fn must be quick.
func (s *Store) OnCommit(fn func(key string, rev events.Revision)) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	var fns []func(string, events.Revision)
	if cur := s.committed.Load(); cur != nil {
		fns = append(fns, *cur...)
	}
	fns = append(fns, fn)
	s.committed.Store(&fns)
}

func (s *Store) noteCommit(key string, rev events.Revision) {
	if fns := s.committed.Load(); fns != nil {
		for _, fn := range *fns {
			fn(key, rev)
		}
	}
}

// New returns a Store on an etcd client.
func New(cli *clientv3.Client) *Store { return &Store{cli: cli} }

// Client is the underlying etcd client.
func (s *Store) Client() *clientv3.Client { return s.cli }

// Key builds the etcd key of an object (events.RegistryKey: the one key
// format the store and the publisher share). An empty name gives the
// prefix of the collection (ending in "/").
func Key(group, resource, namespace, name string) string {
	return events.RegistryKey(group, resource, namespace, name)
}

func metaOp(key string, meta *events.WriteMeta) (clientv3.Op, error) {
	meta.Key = key
	b, err := json.Marshal(meta)
	if err != nil {
		return clientv3.Op{}, fmt.Errorf("storage: encode write meta: %w", err)
	}
	return clientv3.OpPut(events.MetaKey, string(b)), nil
}

// Get reads one object.
func (s *Store) Get(ctx context.Context, key string) (KV, error) {
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return KV{}, fmt.Errorf("storage: get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return KV{Revision: events.Revision(resp.Header.Revision)}, ErrNotFound
	}
	kv := resp.Kvs[0]
	return KV{Key: key, Value: kv.Value, Revision: events.Revision(kv.ModRevision), CreateRevision: events.Revision(kv.CreateRevision)}, nil
}

// Create stores a new object; ErrExists if the key is taken, a
// *ClaimError if a key extra claims is.
func (s *Store) Create(ctx context.Context, key string, value []byte, meta *events.WriteMeta, extra ...Extra) (events.Revision, error) {
	resp, err := s.commit(ctx, key, clientv3.Compare(clientv3.CreateRevision(key), "=", 0), clientv3.OpPut(key, string(value)), meta, extra)
	if err != nil {
		return 0, fmt.Errorf("storage: create %s: %w", key, err)
	}
	if resp.Succeeded {
		s.noteCommit(key, events.Revision(resp.Header.Revision))
		return events.Revision(resp.Header.Revision), nil
	}
	if cur := current(key, resp); cur.Revision != 0 {
		return 0, ErrExists
	}
	return 0, claimError(resp)
}

// Update replaces an object if its revision is still expect. On ErrConflict
// (or ErrNotFound) the returned KV is the current state; a *ClaimError
// says a key extra claims is taken.
func (s *Store) Update(ctx context.Context, key string, value []byte, expect events.Revision, meta *events.WriteMeta, extra ...Extra) (events.Revision, KV, error) {
	resp, err := s.commit(ctx, key, clientv3.Compare(clientv3.ModRevision(key), "=", int64(expect)), clientv3.OpPut(key, string(value)), meta, extra)
	if err != nil {
		return 0, KV{}, fmt.Errorf("storage: update %s: %w", key, err)
	}
	return s.settled(key, expect, resp)
}

// Delete removes an object if its revision is still expect, as Update.
func (s *Store) Delete(ctx context.Context, key string, expect events.Revision, meta *events.WriteMeta, extra ...Extra) (events.Revision, KV, error) {
	resp, err := s.commit(ctx, key, clientv3.Compare(clientv3.ModRevision(key), "=", int64(expect)), clientv3.OpDelete(key), meta, extra)
	if err != nil {
		return 0, KV{}, fmt.Errorf("storage: delete %s: %w", key, err)
	}
	return s.settled(key, expect, resp)
}

// settled reads the outcome of an Update or Delete transaction.
func (s *Store) settled(key string, expect events.Revision, resp *clientv3.TxnResponse) (events.Revision, KV, error) {
	if resp.Succeeded {
		s.noteCommit(key, events.Revision(resp.Header.Revision))
		return events.Revision(resp.Header.Revision), KV{}, nil
	}
	cur := current(key, resp)
	if cur.Revision == expect {
		// The object's compare held: a claim failed.
		return 0, cur, claimError(resp)
	}
	return 0, cur, conflictOrNotFound(resp)
}

func current(key string, resp *clientv3.TxnResponse) KV {
	if len(resp.Responses) == 0 {
		return KV{}
	}
	r := resp.Responses[0].GetResponseRange()
	if r == nil || len(r.Kvs) == 0 {
		return KV{}
	}
	kv := r.Kvs[0]
	return KV{Key: key, Value: kv.Value, Revision: events.Revision(kv.ModRevision), CreateRevision: events.Revision(kv.CreateRevision)}
}

func conflictOrNotFound(resp *clientv3.TxnResponse) error {
	if len(resp.Responses) > 0 {
		if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
			return ErrConflict
		}
	}
	return ErrNotFound
}

// ListOptions selects a page of a collection.
type ListOptions struct {
	// Limit is the page size; 0 means everything.
	Limit int64
	// StartKey continues a previous page (inclusive).
	StartKey string
	// Revision reads at a past revision; 0 means now.
	Revision events.Revision
}

// ListResult is one page.
type ListResult struct {
	Items []KV
	// Revision the page was read at.
	Revision events.Revision
	// NextKey is where the next page starts; empty when there is none.
	NextKey string
	// Remaining counts the items after this page.
	Remaining int64
}

// List reads a page of the keys under prefix in key order.
func (s *Store) List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error) {
	start := prefix
	if opts.StartKey != "" {
		if !strings.HasPrefix(opts.StartKey, prefix) {
			return ListResult{}, fmt.Errorf("storage: continue key %q outside %q", opts.StartKey, prefix)
		}
		start = opts.StartKey
	}
	ops := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix))}
	if opts.Limit > 0 {
		ops = append(ops, clientv3.WithLimit(opts.Limit))
	}
	if opts.Revision > 0 {
		ops = append(ops, clientv3.WithRev(int64(opts.Revision)))
	}
	resp, err := s.cli.Get(ctx, start, ops...)
	if err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			return ListResult{}, fmt.Errorf("storage: list %s at %d: %w", prefix, opts.Revision, ErrCompacted)
		}
		return ListResult{}, fmt.Errorf("storage: list %s: %w", prefix, err)
	}
	res := ListResult{Revision: events.Revision(resp.Header.Revision), Items: make([]KV, 0, len(resp.Kvs))}
	if opts.Revision > 0 {
		res.Revision = opts.Revision
	}
	for _, kv := range resp.Kvs {
		res.Items = append(res.Items, KV{Key: string(kv.Key), Value: kv.Value, Revision: events.Revision(kv.ModRevision), CreateRevision: events.Revision(kv.CreateRevision)})
	}
	if resp.More && len(resp.Kvs) > 0 {
		res.NextKey = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		res.Remaining = resp.Count - int64(len(resp.Kvs))
		if opts.StartKey != "" {
			// Count is of the range from StartKey, which is what remains.
			res.Remaining = resp.Count - int64(len(resp.Kvs))
		}
	}
	return res, nil
}

// Head returns the current etcd revision.
func (s *Store) Head(ctx context.Context) (events.Revision, error) {
	resp, err := s.cli.Get(ctx, events.MetaKey)
	if err != nil {
		return 0, fmt.Errorf("storage: head: %w", err)
	}
	return events.Revision(resp.Header.Revision), nil
}
