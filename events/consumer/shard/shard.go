package shard

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-dev/cairn/events"
)

// The lease timings are kube's leader election's (client-go's
// leaderelection as kube-controller-manager and kube-scheduler run it:
// --leader-elect-lease-duration 15s, --leader-elect-renew-deadline 10s,
// --leader-elect-retry-period 2s).
const (
	// DefaultLeaseTTL is how long a lease lives without renewal.
	DefaultLeaseTTL = 15 * time.Second
	// DefaultRenewDeadline is how long after its last renewal a lease is
	// still used (Owns): DefaultLeaseTTL minus the default Margin.
	DefaultRenewDeadline = 10 * time.Second
	// DefaultRetryPeriod is the interval of renewals and rounds.
	DefaultRetryPeriod = 2 * time.Second
)

// Config configures a Sharder.
type Config struct {
	// JS is the JetStream context the bucket is reached through. Run
	// opens a connection of its own with the same options (JS.Conn().Opts)
	// for the leases, so renewals never queue behind the consumer's bulk
	// traffic on JS's connection; without one (JS.Conn() nil or the dial
	// fails) it uses JS.
	JS jetstream.JetStream
	// LeaseJS, if set, is the JetStream context of the leases instead of
	// the connection Run dials.
	LeaseJS jetstream.JetStream
	// Group names the set of replicas sharing keys, e.g.
	// "controller-manager"; it names the bucket.
	Group string
	// Identity of this replica; default "<hostname>-<pid>".
	Identity string
	// Partitions is the number of partitions; default 32. Every replica of
	// a group must use the same number.
	Partitions int
	// LeaseTTL is how long a lease lives without renewal; default
	// DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Margin is how long before a lease can expire Owns turns false;
	// default LeaseTTL/3 (with the default lease, Owns is false from
	// DefaultRenewDeadline after the last successful renewal on).
	Margin time.Duration
	// RetryPeriod is the interval of renewals (the member key and every
	// lease, from a goroutine of their own, all leases at once) and of
	// rounds (acquire, release); default the smaller of
	// DefaultRetryPeriod and LeaseTTL/6.
	RetryPeriod time.Duration
	// Registerer receives the sharder's counters (partitions acquired,
	// released, lost, by group); nil registers none.
	Registerer prometheus.Registerer
	// CatchUp runs after a partition is acquired and before it is used.
	CatchUp func(ctx context.Context) error
	// OnAcquire is called once a partition is ready.
	OnAcquire func(partition int)
	// OnRelease is called once a partition is released or lost: no
	// reconcile of its keys runs any more.
	OnRelease func(partition int)
	Log       *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// ErrConfig reports a bad Config.
var ErrConfig = errors.New("shard: bad config")

type lease struct {
	rev       uint64
	renewed   time.Time
	ready     bool
	releasing bool
	inflight  int
}

// Sharder holds this replica's partitions. Create it with New and call Run.
type Sharder struct {
	cfg     Config
	kv      jetstream.KeyValue
	log     *slog.Logger
	metrics *metrics

	mu     sync.Mutex
	cond   *sync.Cond
	leases map[int]*lease

	// logged is the leased set of the last summary line; only Run's
	// goroutine uses it.
	logged []int
}

// New returns a Sharder; nothing runs until Run.
func New(cfg Config) (*Sharder, error) {
	if cfg.JS == nil || cfg.Group == "" {
		return nil, fmt.Errorf("%w: JS and Group are required", ErrConfig)
	}
	if cfg.Identity == "" {
		h, _ := os.Hostname()
		cfg.Identity = h + "-" + strconv.Itoa(os.Getpid())
	}
	cfg.Identity = strings.NewReplacer(".", "_", "*", "_", ">", "_", " ", "_").Replace(cfg.Identity)
	if cfg.Partitions <= 0 {
		cfg.Partitions = 32
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Margin <= 0 {
		cfg.Margin = cfg.LeaseTTL / 3
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = min(DefaultRetryPeriod, cfg.LeaseTTL/6)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sharder{cfg: cfg, leases: map[int]*lease{}, log: cfg.Log.With("shard", cfg.Group, "identity", cfg.Identity),
		metrics: newMetrics(cfg.Registerer, cfg.Group)}
	s.cond = sync.NewCond(&s.mu)
	return s, nil
}

// Partitions is the number of partitions keys are split into.
func (s *Sharder) Partitions() int { return s.cfg.Partitions }

// Identity is this replica's name in the group.
func (s *Sharder) Identity() string { return s.cfg.Identity }

// Partition of a key: events.KeyHash(key) % Partitions. With a partition
// count that divides events.Partitions, subject partition t (of the
// objects a controller owns, see events.Partition) belongs to sharder
// partition t % Partitions.
func (s *Sharder) Partition(key string) int {
	return int(events.KeyHash(key) % uint32(s.cfg.Partitions))
}

// Owns reports whether this replica may act on key now.
func (s *Sharder) Owns(key string) bool {
	p := s.Partition(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usableLocked(p)
}

func (s *Sharder) usableLocked(p int) bool {
	l := s.leases[p]
	return l != nil && l.ready && !l.releasing && s.cfg.Now().Sub(l.renewed) < s.cfg.LeaseTTL-s.cfg.Margin
}

// Guard is Owns for a reconcile: while done has not been called, the
// key's partition is not released.
func (s *Sharder) Guard(key string) (done func(), ok bool) {
	p := s.Partition(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.usableLocked(p) {
		return nil, false
	}
	l := s.leases[p]
	l.inflight++
	return func() {
		s.mu.Lock()
		l.inflight--
		s.cond.Broadcast()
		s.mu.Unlock()
	}, true
}

// Held returns the partitions this replica holds and has made ready.
func (s *Sharder) Held() []int {
	return s.partitions(func(p int, _ *lease) bool { return s.usableLocked(p) })
}

// Leased are the partitions this replica holds a lease on, ready or still
// catching up, and not being released, in order: a superset of Held.
func (s *Sharder) Leased() []int {
	return s.partitions(func(_ int, l *lease) bool { return !l.releasing })
}

// partitions are the leased partitions that keep selects (called with mu
// held), in order.
func (s *Sharder) partitions(keep func(p int, l *lease) bool) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for p, l := range s.leases {
		if keep(p, l) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (s *Sharder) bucket() string {
	return "cairn_shards_" + strings.NewReplacer(".", "_", "-", "_", " ", "_").Replace(s.cfg.Group)
}

// Run takes part in the group until ctx is done, then releases every
// partition it holds (waiting for running reconciles) so others take them
// over at once.
func (s *Sharder) Run(ctx context.Context) error {
	js, closeConn := s.leaseJS()
	defer closeConn()
	kvc := jetstream.KeyValueConfig{
		Bucket:      s.bucket(),
		Description: "cairn: partition leases of " + s.cfg.Group,
		TTL:         s.cfg.LeaseTTL,
		History:     1,
	}
	// The replicas of a bucket that exists are kept: on servers joined
	// into one cluster they follow its size (set by the servers), which a
	// replica that starts must not set back to 1.
	if old, err := js.KeyValue(ctx, kvc.Bucket); err == nil {
		if st, err := old.Status(ctx); err == nil {
			if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
				kvc.Replicas = bs.StreamInfo().Config.Replicas
			}
		}
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, kvc)
	if err != nil {
		return fmt.Errorf("shard: bucket %s: %w", s.bucket(), err)
	}
	s.kv = kv
	var wg sync.WaitGroup
	defer wg.Wait()
	// The watch starts before the first heartbeat, so that it does not
	// miss the hand-overs that this replica's arrival starts.
	kick := make(chan struct{}, 1)
	wg.Go(func() { s.watchLoop(ctx, kick) })
	s.heartbeat(ctx)
	rctx, stopRenew := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		s.renewLoop(rctx)
	}()
	tick := time.NewTicker(s.cfg.RetryPeriod)
	defer tick.Stop()
	for {
		s.round(ctx, &wg)
		s.logMoves()
		select {
		case <-ctx.Done():
			stopRenew()
			<-renewed
			start := time.Now()
			n := s.releaseAll()
			s.log.Info("shard: released every partition", "released", n, "partitions", s.cfg.Partitions,
				"took", time.Since(start).Round(time.Millisecond))
			return nil
		case <-tick.C:
		case <-kick:
		}
	}
}

// watchLoop kicks a round (a send on kick, which holds one) whenever the
// bucket changes in a way a round acts on, so that moves between live
// replicas take a round trip rather than a RetryPeriod: a member joins
// (its first heartbeat) or leaves (deletes its key), or a lease is given
// up (deleted). Keys that expire produce no event: the rounds every
// RetryPeriod find those. A watch that fails is started again after a
// RetryPeriod until ctx is done.
func (s *Sharder) watchLoop(ctx context.Context, kick chan<- struct{}) {
	seen := map[string]time.Time{} // member -> when its last heartbeat was seen
	for {
		if err := s.watch(ctx, kick, seen); err != nil && ctx.Err() == nil {
			s.log.Warn("shard: watch failed; moves wait for the next round", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.RetryPeriod):
		}
	}
}

func (s *Sharder) watch(ctx context.Context, kick chan<- struct{}, seen map[string]time.Time) error {
	w, err := s.kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("shard: watch %s: %w", s.bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("shard: watch %s: closed", s.bucket())
			}
			if e != nil && s.changed(e, seen) {
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}
	}
}

// changed reports whether e, an update of the bucket, calls for a round.
func (s *Sharder) changed(e jetstream.KeyValueEntry, seen map[string]time.Time) bool {
	deleted := e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge
	member, ok := strings.CutPrefix(e.Key(), memberPrefix)
	if !ok {
		return deleted // a lease given up
	}
	if member == s.cfg.Identity {
		return false
	}
	if deleted {
		delete(seen, member)
		return true
	}
	now := s.cfg.Now()
	last, known := seen[member]
	seen[member] = now
	// A member whose heartbeats stopped for a lease's life expired: it
	// comes back as a new one.
	return !known || now.Sub(last) > s.cfg.LeaseTTL
}

// logMoves logs one summary line when the leased partitions differ from
// the last summary: "shard: holds N of M partitions", with what was gained
// and lost since. Run calls it once a round, so a rebalance that moves
// many partitions at once is one line, not one per partition.
func (s *Sharder) logMoves() {
	now := s.Leased()
	if slices.Equal(now, s.logged) {
		return
	}
	gained, lost := diff(s.logged, now), diff(now, s.logged)
	s.logged = now
	s.log.Info(fmt.Sprintf("shard: holds %d of %d partitions", len(now), s.cfg.Partitions),
		"held", ranges(now), "gained", ranges(gained), "lost", ranges(lost))
}

// diff returns the elements of b (sorted) that are not in a.
func diff(a, b []int) []int {
	var out []int
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, x)
		}
	}
	return out
}

// ranges formats sorted partitions compactly: [0 1 2 3 7 9 10] is
// "0-3,7,9-10"; none is "".
func ranges(ps []int) string {
	var b strings.Builder
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ps[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(ps[j]))
		}
		i = j + 1
	}
	return b.String()
}

// leaseJS is the JetStream context of the leases: on a connection of
// their own, dialled with the options of Config.JS's, closed by the
// returned func; Config.JS itself when there is none.
func (s *Sharder) leaseJS() (jetstream.JetStream, func()) {
	if s.cfg.LeaseJS != nil {
		return s.cfg.LeaseJS, func() {}
	}
	nc := s.cfg.JS.Conn()
	if nc == nil {
		return s.cfg.JS, func() {}
	}
	o := nc.Opts
	o.Name += " (leases " + s.cfg.Group + ")"
	own, err := o.Connect()
	if err != nil {
		s.log.Warn("shard: no connection of its own for the leases; sharing the consumer's", "err", err)
		return s.cfg.JS, func() {}
	}
	js, err := jetstream.New(own)
	if err != nil {
		own.Close()
		s.log.Warn("shard: no connection of its own for the leases; sharing the consumer's", "err", err)
		return s.cfg.JS, func() {}
	}
	return js, own.Close
}

// renewLoop renews the member key and every lease each RetryPeriod until
// ctx is done. It runs on a goroutine of its own, apart from the rounds
// (whose catch-ups and hand-overs can take long), so that a renewal is
// never late because of other work of the sharder.
func (s *Sharder) renewLoop(ctx context.Context) {
	tick := time.NewTicker(s.cfg.RetryPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.heartbeat(ctx)
		s.renew(ctx)
	}
}

// heartbeat renews the member key.
func (s *Sharder) heartbeat(ctx context.Context) {
	if _, err := s.kv.Put(ctx, memberKey(s.cfg.Identity), []byte(s.cfg.Now().UTC().Format(time.RFC3339Nano))); err != nil && ctx.Err() == nil {
		s.log.Warn("shard: member heartbeat failed", "err", err)
	}
}

// round acquires and releases partitions toward the desired assignment.
func (s *Sharder) round(ctx context.Context, wg *sync.WaitGroup) {
	members, err := s.members(ctx)
	if err != nil {
		s.log.Warn("shard: list members failed", "err", err)
		return
	}

	want := map[int]bool{}
	for p := 0; p < s.cfg.Partitions; p++ {
		if owner(members, p) == s.cfg.Identity {
			want[p] = true
		}
	}
	for p := 0; p < s.cfg.Partitions; p++ {
		s.mu.Lock()
		l := s.leases[p]
		s.mu.Unlock()
		switch {
		case want[p] && l == nil:
			s.acquire(ctx, p, wg)
		case !want[p] && l != nil && l.ready && !l.releasing:
			// Hand it over to the member that should hold it.
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.release(p)
			}()
		}
	}
}

func (s *Sharder) members(ctx context.Context) ([]string, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, memberPrefix+">")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return []string{s.cfg.Identity}, nil
		}
		return nil, err
	}
	var out []string
	for k := range lister.Keys() {
		out = append(out, strings.TrimPrefix(k, memberPrefix))
	}
	if !slices.Contains(out, s.cfg.Identity) {
		out = append(out, s.cfg.Identity)
	}
	return out, nil
}

// owner is the member that should hold partition p (rendezvous hashing).
func owner(members []string, p int) string {
	best, bestScore := "", uint64(0)
	for _, m := range members {
		h := fnv.New64a()
		_, _ = h.Write([]byte(m + "/" + strconv.Itoa(p)))
		// FNV alone mixes short, similar strings poorly ("a/1" vs "b/1");
		// the splitmix64 finalizer spreads the scores.
		if sc := mix(h.Sum64()); best == "" || sc > bestScore || sc == bestScore && m < best {
			best, bestScore = m, sc
		}
	}
	return best
}

func leaseKey(p int) string { return "p." + strconv.Itoa(p) }

// memberPrefix starts the key of each member's heartbeat (memberKey).
const memberPrefix = "m."

func memberKey(identity string) string { return memberPrefix + identity }

func (s *Sharder) acquire(ctx context.Context, p int, wg *sync.WaitGroup) {
	now := s.cfg.Now()
	rev, err := s.kv.Create(ctx, leaseKey(p), []byte(s.cfg.Identity))
	if err != nil {
		// Held by another replica (alive or not yet expired): try again
		// next round; unless it is held in this replica's name.
		if rev, err = s.takeOver(ctx, p); err != nil {
			return
		}
	}
	s.mu.Lock()
	s.leases[p] = &lease{rev: rev, renewed: now}
	s.mu.Unlock()
	s.metrics.acquired.Inc()
	s.log.Debug("shard: acquired partition", "partition", p)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if s.cfg.CatchUp != nil {
			if err := s.cfg.CatchUp(ctx); err != nil {
				if ctx.Err() != nil {
					// Stopping: Run releases it.
					s.log.Debug("shard: catch-up cut short by the stop", "partition", p, "err", err)
					return
				}
				s.log.Warn("shard: catch-up failed; releasing", "partition", p, "err", err)
				s.metrics.catchUpFailed.Inc()
				s.release(p)
				return
			}
		}
		s.mu.Lock()
		if l := s.leases[p]; l != nil {
			l.ready = true
		}
		s.mu.Unlock()
		if s.cfg.OnAcquire != nil {
			s.cfg.OnAcquire(p)
		}
	}()
}

// renew renews every held lease at once, each with its own compare-and-
// swap, and drops those another replica holds now or that ran out.
// takeOver takes partition p's lease if it is held in this replica's
// Identity, which is unique among live replicas: an earlier process of
// this replica, now dead (a server restarted after a crash), or this one,
// whose renewal went through unseen. It does not wait for the lease to
// expire; the catch-up that follows still reads everything written before.
func (s *Sharder) takeOver(ctx context.Context, p int) (uint64, error) {
	e, err := s.kv.Get(ctx, leaseKey(p))
	if err != nil {
		return 0, err
	}
	if string(e.Value()) != s.cfg.Identity {
		return 0, fmt.Errorf("shard: partition %d held by %s", p, e.Value())
	}
	return s.kv.Update(ctx, leaseKey(p), []byte(s.cfg.Identity), e.Revision())
}

func (s *Sharder) renew(ctx context.Context) {
	s.mu.Lock()
	held := make(map[int]uint64, len(s.leases))
	for p, l := range s.leases {
		if !l.releasing {
			held[p] = l.rev
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for p, rev := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.renewOne(ctx, p, rev)
		}()
	}
	wg.Wait()
}

func (s *Sharder) renewOne(ctx context.Context, p int, rev uint64) {
	now := s.cfg.Now()
	nrev, err := s.kv.Update(ctx, leaseKey(p), []byte(s.cfg.Identity), rev)
	if err != nil && ctx.Err() != nil {
		return // shutting down: Run releases it
	}
	s.mu.Lock()
	l := s.leases[p]
	lost := false
	switch {
	case l == nil || l.rev != rev:
	case err == nil:
		// Also while releasing: the release deletes the lease at the
		// revision it has now.
		l.rev, l.renewed = nrev, now
	case l.releasing:
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound):
		// Someone else holds it now (our lease expired): drop it.
		s.log.Warn("shard: lost partition", "partition", p, "err", err, "since_renewal", s.cfg.Now().Sub(l.renewed).Round(time.Millisecond))
		delete(s.leases, p)
		lost = true
	default:
		// NATS unreachable: keep trying until the lease runs out;
		// Owns is already false Margin before that.
		if s.cfg.Now().Sub(l.renewed) > s.cfg.LeaseTTL {
			s.log.Warn("shard: lost partition", "partition", p, "err", err)
			delete(s.leases, p)
			lost = true
		}
	}
	s.mu.Unlock()
	if lost {
		s.metrics.lost.Inc()
		if s.cfg.OnRelease != nil {
			s.cfg.OnRelease(p)
		}
	}
}

// release stops using partition p, waits for its running reconciles, and
// deletes the lease so the next owner can take it at once. A release of p
// already under way is left to finish.
func (s *Sharder) release(p int) {
	s.mu.Lock()
	l := s.leases[p]
	if l == nil || l.releasing {
		s.mu.Unlock()
		return
	}
	l.releasing = true
	for l.inflight > 0 {
		s.cond.Wait()
	}
	rev := l.rev
	if s.leases[p] == l {
		delete(s.leases, p)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.deleteLease(ctx, p, rev); err != nil {
		// It expires LeaseTTL after its last renewal.
		s.log.Warn("shard: release failed; the partition moves once its lease expires", "partition", p, "err", err)
	}
	s.metrics.released.Inc()
	s.log.Debug("shard: released partition", "partition", p)
	if s.cfg.OnRelease != nil {
		s.cfg.OnRelease(p)
	}
}

// deleteLease deletes partition p's lease, last written at rev, if this
// replica still holds it. A renewal in flight when the release began may
// have moved the lease past rev (a Delete at rev would then fail and leave
// the lease to expire): the lease is then deleted at the revision it has,
// if it is still in this replica's Identity.
func (s *Sharder) deleteLease(ctx context.Context, p int, rev uint64) error {
	for range 3 {
		err := s.kv.Delete(ctx, leaseKey(p), jetstream.LastRevision(rev))
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return err
		}
		e, err := s.kv.Get(ctx, leaseKey(p))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return nil // expired or deleted already
		case err != nil:
			return err
		case string(e.Value()) != s.cfg.Identity:
			return nil // another replica's since it expired
		}
		rev = e.Revision()
	}
	return fmt.Errorf("shard: delete lease of partition %d: %w", p, jetstream.ErrKeyRevisionMismatch)
}

// releaseAll deletes the member key, then releases every partition at
// once, and returns how many partitions it released. The member key goes
// first so that the others, counting without this replica, take each
// partition as soon as its lease is gone.
func (s *Sharder) releaseAll() int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.kv.Delete(ctx, memberKey(s.cfg.Identity)); err != nil {
		s.log.Debug("shard: delete member key", "err", err)
	}
	s.mu.Lock()
	var ps []int
	for p := range s.leases {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { s.release(p) })
	}
	wg.Wait()
	return len(ps)
}

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
