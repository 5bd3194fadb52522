package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

func TestOwner(t *testing.T) {
	for _, members := range [][]string{{"a", "b"}, {"a", "b", "c"}, {"r0", "r1", "r2"}, {"vm-1234", "vm-1235"}} {
		count := map[string]int{}
		for p := 0; p < 32; p++ {
			count[owner(members, p)]++
		}
		for _, m := range members {
			if count[m] < 32/len(members)/3 {
				t.Errorf("member %s of %v owns only %d of 32 partitions: %v", m, members, count[m], count)
			}
		}
	}
	members := []string{"a", "b", "c"}
	// Removing a member only moves that member's partitions.
	for p := 0; p < 300; p++ {
		before, after := owner(members, p), owner([]string{"a", "b"}, p)
		if before != "c" && before != after {
			t.Fatalf("partition %d moved from %s to %s", p, before, after)
		}
	}
}

type replica struct {
	s      *Sharder
	nc     *nats.Conn
	leases *nats.Conn // the leases' own connection (Config.LeaseJS)
	cancel context.CancelFunc
	done   chan struct{}
}

func startReplica(t *testing.T, url, id string, opts ...func(*Config)) *replica {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	ljs, err := jetstream.New(lc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{JS: js, LeaseJS: ljs, Group: "test", Identity: id, Partitions: 16, LeaseTTL: 3 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{s: s, nc: nc, leases: lc, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		_ = s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
		nc.Close()
		lc.Close()
	})
	return r
}

// crash cuts the replica's connections, as a killed process's.
func (r *replica) crash() {
	r.nc.Close()
	r.leases.Close()
}

// TestRestartTakesOwnLeases: a replica that crashed and comes back under
// the same identity takes its leases over at once, without waiting for
// them to expire (a lease far longer than the wait), while a replica of
// another identity cannot.
func TestRestartTakesOwnLeases(t *testing.T) {
	n := embeddedtest.StartNATS(t)
	long := func(c *Config) { c.LeaseTTL = 5 * time.Minute }
	a := startReplica(t, n.URL(), "a", long)
	waitCovered(t, []*replica{a}, 20*time.Second)
	a.crash()
	other := startReplica(t, n.URL(), "b", long)
	time.Sleep(3 * other.s.cfg.RetryPeriod)
	if got := other.s.Leased(); len(got) != 0 {
		t.Fatalf("b leased %v while a's leases were alive", got)
	}
	other.cancel()
	<-other.done
	again := startReplica(t, n.URL(), "a", long)
	waitCovered(t, []*replica{again}, 30*time.Second)
}

// check samples every replica's partitions: no partition is ever usable on
// two replicas at once. It returns the union once it covers every
// partition, or fails after timeout.
func waitCovered(t *testing.T, rs []*replica, timeout time.Duration) map[int]string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		union := map[int]string{}
		for i, r := range rs {
			for _, p := range r.s.Held() {
				if prev, dup := union[p]; dup {
					t.Fatalf("partition %d held by %s and replica %d at once", p, prev, i)
				}
				union[p] = r.s.Identity()
			}
		}
		if len(union) == 16 {
			return union
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 16 partitions held after %v: %v", len(union), timeout, union)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestShardingFailover(t *testing.T) {
	n := embeddedtest.StartNATS(t)
	var rs []*replica
	for i := 0; i < 3; i++ {
		rs = append(rs, startReplica(t, n.URL(), fmt.Sprintf("r%d", i)))
	}
	waitCovered(t, rs, 20*time.Second)
	// Spread out: every replica ends up with some partitions.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for _, r := range rs {
			if len(r.s.Held()) == 0 {
				ok = false
			}
		}
		waitCovered(t, rs, 10*time.Second)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("partitions never spread to every replica")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// r0 loses its connection, as a crashed process would: its leases
	// expire and the others take over within the lease TTL plus a round.
	rs[0].crash()
	start := time.Now()
	var mu sync.Mutex
	deadline = time.Now().Add(10 * time.Second)
	for {
		union := waitCovered(t, rs, time.Until(deadline))
		mu.Lock()
		taken := true
		for _, owner := range union {
			if owner == "r0" {
				taken = false
			}
		}
		mu.Unlock()
		if taken {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("partitions of the dead replica taken over in %v", time.Since(start).Round(10*time.Millisecond))
}

func TestGuardDelaysRelease(t *testing.T) {
	n := embeddedtest.StartNATS(t)
	a := startReplica(t, n.URL(), "a")
	waitCovered(t, []*replica{a}, 20*time.Second)
	key := "default/x"
	done, ok := a.s.Guard(key)
	if !ok {
		t.Fatal("a does not own the key it holds every partition of")
	}
	b := startReplica(t, n.URL(), "b")
	p := a.s.Partition(key)
	if owner([]string{"a", "b"}, p) != "b" {
		// The key stays with a; nothing to hand over.
		done()
		return
	}
	// b wants p, but a keeps it while the reconcile runs.
	time.Sleep(2 * time.Second)
	for _, q := range b.s.Held() {
		if q == p {
			t.Fatal("b took a partition while a reconcile of it was running on a")
		}
	}
	done()
	waitCovered(t, []*replica{a, b}, 15*time.Second)
}

// TestOnRelease: a replica that hands partitions to a new one is told of
// each, and Leased covers Held.
func TestOnRelease(t *testing.T) {
	n := embeddedtest.StartNATS(t)
	var mu sync.Mutex
	released := map[int]bool{}
	a := startReplica(t, n.URL(), "a", func(c *Config) {
		c.OnRelease = func(p int) {
			mu.Lock()
			defer mu.Unlock()
			released[p] = true
		}
	})
	waitCovered(t, []*replica{a}, 20*time.Second)
	if l := a.s.Leased(); len(l) != 16 {
		t.Fatalf("a leases %v, want all 16", l)
	}
	b := startReplica(t, n.URL(), "b")
	// a reports a release right after deleting the lease, so b may take
	// the partition a moment before: wait for both.
	handedOver := func() bool {
		mu.Lock()
		defer mu.Unlock()
		bh := b.s.Held()
		if len(bh) == 0 || len(a.s.Held())+len(bh) < 16 {
			return false
		}
		for _, p := range bh {
			if !released[p] {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(20 * time.Second)
	for !handedOver() {
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("no clean hand-over: a holds %v, b holds %v, a reported releasing %v", a.s.Held(), b.s.Held(), released)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range a.s.Held() {
		if released[p] {
			t.Errorf("a holds partition %d, which it reported released", p)
		}
		if !slices.Contains(a.s.Leased(), p) {
			t.Errorf("a holds partition %d but does not lease it", p)
		}
	}
}

// records is a slog.Handler that keeps the message and level of every
// record, for tests of what a Sharder logs.
type records struct {
	mu   sync.Mutex
	msgs []string // "LEVEL message"
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Level.String()+" "+rec.Message)
	return nil
}

// info returns the info (and above) messages logged so far.
func (r *records) info() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.msgs {
		if !strings.HasPrefix(m, "DEBUG ") {
			out = append(out, m)
		}
	}
	return out
}

// TestLogSummarizesMoves checks that partition moves are summary lines:
// taking all 16 partitions is one "holds 16 of 16" line, handing half to
// a new replica one more, and stopping one line, never a line per
// partition above debug.
func TestLogSummarizesMoves(t *testing.T) {
	n := embeddedtest.StartNATS(t)
	rec := &records{}
	r0 := startReplica(t, n.URL(), "r0", func(c *Config) { c.Log = slog.New(rec) })
	waitCovered(t, []*replica{r0}, 20*time.Second)
	waitLogged := func(want func(string) bool, what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !slices.ContainsFunc(rec.info(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s logged after 20s; info lines: %q", what, rec.info())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	is := func(line string) func(string) bool { return func(m string) bool { return m == line } }
	waitLogged(is("INFO shard: holds 16 of 16 partitions"), "16 of 16")
	if got := rec.info(); len(got) != 1 {
		t.Errorf("acquiring 16 partitions logged %d info lines, want 1: %q", len(got), got)
	}

	r1 := startReplica(t, n.URL(), "r1")
	waitCovered(t, []*replica{r0, r1}, 20*time.Second)
	for len(r1.s.Held()) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	waitLogged(func(m string) bool {
		return strings.HasPrefix(m, "INFO shard: holds ") && m != "INFO shard: holds 16 of 16 partitions"
	}, "a summary after the handover")

	r0.cancel()
	<-r0.done
	waitLogged(is("INFO shard: released every partition"), "the stop")
	for _, m := range rec.info() {
		if strings.Contains(m, "acquired") || strings.Contains(m, "released partition") {
			t.Errorf("a line per partition above debug: %q", m)
		}
	}
	if got := len(rec.info()); got > 6 {
		t.Errorf("%d info lines for two moves and a stop: %q", got, rec.info())
	}
}

func TestRanges(t *testing.T) {
	tests := []struct {
		in   []int
		want string
	}{
		{in: nil, want: ""},
		{in: []int{5}, want: "5"},
		{in: []int{0, 1, 2, 3}, want: "0-3"},
		{in: []int{0, 1, 2, 3, 7, 9, 10}, want: "0-3,7,9-10"},
		{in: []int{1, 3, 5}, want: "1,3,5"},
	}
	for _, tt := range tests {
		if got := ranges(tt.in); got != tt.want {
			t.Errorf("ranges(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestHandOverBeforeExpiry: partitions move between live replicas without
// waiting for a lease to expire (the leases here outlive the test): a
// member that joins gets its share as soon as the holder has released it,
// and a member that stops releases every partition at once, as kube's
// leader election with ReleaseOnCancel. Renewals run back to back, so
// releases race with renewals in flight.
func TestHandOverBeforeExpiry(t *testing.T) {
	n := embeddedtest.StartNATS(t)
	long := func(c *Config) { c.LeaseTTL, c.RetryPeriod = 5*time.Minute, 10*time.Millisecond }
	a := startReplica(t, n.URL(), "a", long)
	waitCovered(t, []*replica{a}, 20*time.Second)
	// Slow rounds: the moves below must not wait for one.
	slow := func(c *Config) { c.LeaseTTL, c.RetryPeriod = 5*time.Minute, time.Minute }
	start := time.Now()
	b := startReplica(t, n.URL(), "b", slow)
	waitSplit := func() bool {
		union := waitCovered(t, []*replica{a, b}, 30*time.Second)
		return len(a.s.Held()) > 0 && len(b.s.Held()) > 0 && len(union) == 16
	}
	deadline := time.Now().Add(30 * time.Second)
	for !waitSplit() {
		if time.Now().After(deadline) {
			t.Fatalf("no hand-over to b: a holds %v, b holds %v", a.s.Held(), b.s.Held())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("b joined: %d partitions handed over in %v", len(b.s.Held()), time.Since(start).Round(time.Millisecond))

	start = time.Now()
	a.cancel()
	<-a.done
	stopped := time.Since(start)
	waitCovered(t, []*replica{b}, 30*time.Second)
	t.Logf("a stopped in %v; b holds all 16 after %v", stopped.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// TestReleaseAfterRenewalInFlight: a renewal that reached the server but
// whose answer had not come back when the release began moved the lease
// past the revision the replica knows; the release still deletes it
// rather than leaving it to expire.
func TestReleaseAfterRenewalInFlight(t *testing.T) {
	n := embeddedtest.StartNATS(t)
	// No renewal or round of its own during the test.
	a := startReplica(t, n.URL(), "a", func(c *Config) { c.LeaseTTL, c.RetryPeriod = 5*time.Minute, time.Minute })
	waitCovered(t, []*replica{a}, 20*time.Second)
	ctx := context.Background()
	const p = 3
	a.s.mu.Lock()
	known := a.s.leases[p].rev
	a.s.mu.Unlock()
	if _, err := a.s.kv.Update(ctx, leaseKey(p), []byte("a"), known); err != nil {
		t.Fatal(err)
	}
	if err := a.s.deleteLease(ctx, p, known); err != nil {
		t.Fatalf("delete lease at stale revision: %v", err)
	}
	if e, err := a.s.kv.Get(ctx, leaseKey(p)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("lease of partition %d still there after the release: %v, %v", p, e, err)
	}
	// Held by another replica by now: left alone.
	if _, err := a.s.kv.Create(ctx, leaseKey(p), []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.s.deleteLease(ctx, p, known); err != nil {
		t.Fatalf("delete lease held by b: %v", err)
	}
	if e, err := a.s.kv.Get(ctx, leaseKey(p)); err != nil || string(e.Value()) != "b" {
		t.Fatalf("b's lease: %v, %v", e, err)
	}
}
