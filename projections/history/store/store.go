package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"

	"github.com/cairn-dev/cairn/events"
)

// Buckets of the store. Index keys are <value> 0x00 <pos> unless noted.
var (
	bMeta   = []byte("meta")   // "seq", "rev": how far ingest got
	bEvents = []byte("ev")     // pos -> flag byte + envelope JSON (s2 if flag 1)
	bSum    = []byte("sum")    // pos -> Summary
	bKey    = []byte("key")    // objkey 0 pos -> type byte
	bUID    = []byte("uid")    // uid 0 pos
	bUser   = []byte("user")   // user 0 pos -> Summary
	bTime   = []byte("time")   // unixnano(8) pos
	bCorr   = []byte("corr")   // correlation id 0 pos
	bCause  = []byte("cause")  // causation id 0 pos: the effects of an event
	bID     = []byte("id")     // event id -> pos
	bUIDKey = []byte("uidkey") // uid -> objkey
	bOwner  = []byte("owner")  // owner uid 0 child uid -> nil
)

var allBuckets = [][]byte{bMeta, bEvents, bSum, bKey, bUID, bUser, bTime, bCorr, bCause, bID, bUIDKey, bOwner}

// ErrNotFound is returned for an event or object the store does not hold.
var ErrNotFound = errors.New("store: not found")

// Options configure Open.
type Options struct {
	// Rebuild deletes the store first, so ingest starts again from the
	// oldest event of the log.
	Rebuild bool
	// NoSync skips fsync on commit (tests, benchmarks). A crash may then
	// lose the last batches; ingest reads them again from the log.
	NoSync bool
	// ReadOnly opens an existing store for queries only (shared lock).
	ReadOnly bool
	// Timeout for the file lock; default 2s.
	Timeout time.Duration
	Log     *slog.Logger
}

// Store is the persistent history projection. Queries run in read
// transactions (View) concurrently with one ingest; Store is safe for
// concurrent use.
type Store struct {
	db  *bolt.DB
	log *slog.Logger

	mu      sync.Mutex
	changed chan struct{}
}

// Open opens (creating if needed) the store at path.
func Open(path string, opts Options) (*Store, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.Rebuild && !opts.ReadOnly {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("store: rebuild: %w", err)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: opts.Timeout, NoSync: opts.NoSync, ReadOnly: opts.ReadOnly,
		FreelistType: bolt.FreelistMapType, NoFreelistSync: true,
	})
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if !opts.ReadOnly {
		err = db.Update(func(tx *bolt.Tx) error {
			for _, b := range allBuckets {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("store: init %s: %w", path, err)
		}
	}
	return &Store{db: db, log: opts.Log, changed: make(chan struct{})}, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// Changed returns a channel that is closed at the next commit of ingest.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Store) notify() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// View runs fn in a read transaction: a consistent snapshot of the store.
func (s *Store) View(fn func(*Tx) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}

// Progress is how far ingest got: the stream sequence and revision of the
// last event stored.
type Progress struct {
	Seq uint64          `json:"seq"`
	Rev events.Revision `json:"revision"`
}

// Progress reads how far ingest got.
func (s *Store) Progress() (Progress, error) {
	var p Progress
	err := s.View(func(tx *Tx) error {
		p = tx.Progress()
		return nil
	})
	return p, err
}

// Tx is a read (or, inside ingest, read-write) transaction.
type Tx struct{ tx *bolt.Tx }

// Progress is how far ingest got as of this transaction.
func (t *Tx) Progress() Progress {
	b := t.tx.Bucket(bMeta)
	if b == nil {
		return Progress{}
	}
	var p Progress
	if v := b.Get([]byte("seq")); len(v) == 8 {
		p.Seq = binary.BigEndian.Uint64(v)
	}
	if v := b.Get([]byte("rev")); len(v) == 8 {
		p.Rev = events.Revision(binary.BigEndian.Uint64(v))
	}
	return p
}

// Event reads the full event at p.
func (t *Tx) Event(p Pos) (*events.Event, error) {
	v := t.tx.Bucket(bEvents).Get(p.bytes())
	if len(v) == 0 {
		return nil, fmt.Errorf("store: event %s: %w", p, ErrNotFound)
	}
	data := v[1:]
	if v[0] == 1 {
		var err error
		if data, err = s2.Decode(nil, data); err != nil {
			return nil, fmt.Errorf("store: event %s: %w", p, err)
		}
	}
	var e events.Event
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("store: event %s: %w", p, err)
	}
	return &e, nil
}

// Summary reads the summary of the event at p.
func (t *Tx) Summary(p Pos) (Summary, error) {
	v := t.tx.Bucket(bSum).Get(p.bytes())
	if v == nil {
		return Summary{}, fmt.Errorf("store: event %s: %w", p, ErrNotFound)
	}
	return decodeSummary(v)
}

// ByID finds the position of the event with id.
func (t *Tx) ByID(id string) (Pos, bool) {
	v := t.tx.Bucket(bID).Get([]byte(id))
	if v == nil {
		return Pos{}, false
	}
	return decodePos(v), true
}

// KeyEntry is one change of an object in its key's history.
type KeyEntry struct {
	Pos  Pos
	Type events.Type
}

// History lists the changes of key in (after, upTo], oldest first.
func (t *Tx) History(key ObjKey, after, upTo Pos) []KeyEntry {
	prefix := append([]byte(key.String()), 0)
	c := t.tx.Bucket(bKey).Cursor()
	var out []KeyEntry
	for k, v := c.Seek(append(prefix, after.bytes()...)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		p := decodePos(k[len(prefix):])
		if !after.Less(p) {
			continue
		}
		if upTo.Less(p) {
			break
		}
		out = append(out, KeyEntry{Pos: p, Type: typeOf(v[0])})
	}
	return out
}

// LatestAt is the last change of key at or before rev.
func (t *Tx) LatestAt(key ObjKey, rev events.Revision) (KeyEntry, bool) {
	prefix := append([]byte(key.String()), 0)
	c := t.tx.Bucket(bKey).Cursor()
	k, v := c.Seek(append(append([]byte{}, prefix...), MaxPos(rev).bytes()...))
	if k != nil && bytes.HasPrefix(k, prefix) && !MaxPos(rev).Less(decodePos(k[len(prefix):])) {
		return KeyEntry{Pos: decodePos(k[len(prefix):]), Type: typeOf(v[0])}, true
	}
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return KeyEntry{}, false
	}
	return KeyEntry{Pos: decodePos(k[len(prefix):]), Type: typeOf(v[0])}, true
}

// ListAt lists the objects under a key prefix (group/resource/, optionally
// with namespace/) that exist at rev: the last change of each key at or
// before rev, unless it is a delete. Keys are visited in order, skipping
// from one key to the next with seeks.
func (t *Tx) ListAt(group, resource, namespace string, rev events.Revision) []KeyEntry {
	prefix := ObjKey{Group: group, Resource: resource}.String()
	prefix = prefix[:len(prefix)-1] // drop the trailing "/" of the empty name
	if namespace != "" {
		prefix += namespace + "/"
	}
	c := t.tx.Bucket(bKey).Cursor()
	var out []KeyEntry
	k, _ := c.Seek([]byte(prefix))
	for k != nil && bytes.HasPrefix(k, []byte(prefix)) {
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			break
		}
		name := append([]byte{}, k[:i]...)
		key, _ := ParseObjKey(string(name))
		if e, ok := t.LatestAt(key, rev); ok && e.Type != events.Deleted {
			out = append(out, e)
		}
		k, _ = c.Seek(append(name, 1))
	}
	return out
}

// scanIndex calls fn with the position of every entry of bucket b under
// value, oldest first, until fn returns false.
func (t *Tx) scanIndex(b []byte, value string, fn func(p Pos, v []byte) bool) {
	prefix := append([]byte(value), 0)
	c := t.tx.Bucket(b).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if !fn(decodePos(k[len(prefix):]), v) {
			return
		}
	}
}

func (t *Tx) collect(b []byte, value string) []Pos {
	var out []Pos
	t.scanIndex(b, value, func(p Pos, _ []byte) bool {
		out = append(out, p)
		return true
	})
	return out
}

// ByUID lists the events of the object with uid, oldest first.
func (t *Tx) ByUID(uid string) []Pos { return t.collect(bUID, uid) }

// Effects lists the events caused by the event with id.
func (t *Tx) Effects(id string) []Pos { return t.collect(bCause, id) }

// Correlated lists the events of the chain rooted at correlation id.
func (t *Tx) Correlated(id string) []Pos { return t.collect(bCorr, id) }

// KeyOfUID is the key of the object with uid.
func (t *Tx) KeyOfUID(uid string) (ObjKey, bool) {
	v := t.tx.Bucket(bUIDKey).Get([]byte(uid))
	if v == nil {
		return ObjKey{}, false
	}
	return ParseObjKey(string(v))
}

// Children lists the uids of the objects that name owner in their
// ownerReferences.
func (t *Tx) Children(owner string) []string {
	prefix := append([]byte(owner), 0)
	c := t.tx.Bucket(bOwner).Cursor()
	var out []string
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		out = append(out, string(k[len(prefix):]))
	}
	return out
}

// ScanUser calls fn with the summary of every event by user in [from, to],
// oldest first, until fn returns false.
func (t *Tx) ScanUser(user string, from, to Pos, fn func(Summary) bool) error {
	return scanSummaries(t.tx.Bucket(bUser).Cursor(), append([]byte(user), 0), from, to, fn)
}

// ScanAll calls fn with the summary of every event in [from, to], oldest
// first, until fn returns false.
func (t *Tx) ScanAll(from, to Pos, fn func(Summary) bool) error {
	return scanSummaries(t.tx.Bucket(bSum).Cursor(), nil, from, to, fn)
}

// scanSummaries walks the summaries under prefix, keyed by position after
// the prefix, from from to to.
func scanSummaries(c *bolt.Cursor, prefix []byte, from, to Pos, fn func(Summary) bool) error {
	for k, v := c.Seek(append(prefix[:len(prefix):len(prefix)], from.bytes()...)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if to.Less(decodePos(k[len(prefix):])) {
			return nil
		}
		s, err := decodeSummary(v)
		if err != nil {
			return err
		}
		if !fn(s) {
			return nil
		}
	}
	return nil
}

// RevisionAt is the revision of the newest event whose time is at or
// before at (0 if none).
func (t *Tx) RevisionAt(at time.Time) events.Revision {
	c := t.tx.Bucket(bTime).Cursor()
	key := make([]byte, 8)
	binary.BigEndian.PutUint64(key, uint64(at.UnixNano()+1))
	k, _ := c.Seek(key)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k == nil {
		return 0
	}
	return decodePos(k[8:]).Rev
}

// FirstAfter is the revision of the oldest event whose time is at or after
// at (0 if none).
func (t *Tx) FirstAfter(at time.Time) events.Revision {
	c := t.tx.Bucket(bTime).Cursor()
	key := make([]byte, 8)
	binary.BigEndian.PutUint64(key, uint64(at.UnixNano()))
	k, _ := c.Seek(key)
	if k == nil {
		return 0
	}
	return decodePos(k[8:]).Rev
}
