package publish_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/events/publish"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// waitLeader waits up to timeout for p to lead, and returns how long that
// took after since; ok is false if it did not.
func waitLeader(p *publish.Publisher, since time.Time, timeout time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(timeout)
	for !p.IsLeader() {
		if time.Now().After(deadline) {
			return 0, false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(since), true
}

// TestElectionTakeover: a publisher restarted with the identity of a
// publisher that died holding the election takes the role over at once,
// instead of waiting for the dead session to expire; one of another
// identity waits out the TTL; and taking over one's own key never deposes
// a live leader of another identity.
func TestElectionTakeover(t *testing.T) {
	const ttl = 4 * time.Second
	for _, tc := range []struct {
		name string
		// live, if set, is a live candidate that joins right after the dead
		// one (so it is next in line) and holds on until the end.
		live      string
		dead      string
		candidate string
		// wantWithin bounds the time from the dead candidate's last renewal
		// to the new publisher leading; wantAfter is the least it must take
		// (0: no bound). wantLeader false: it must not lead within ttl+2s.
		wantLeader bool
		wantWithin time.Duration
		wantAfter  time.Duration
	}{
		{name: "same identity takes over at once", dead: "server-a", candidate: "server-a", wantLeader: true, wantWithin: 2 * time.Second},
		{name: "other identity waits for the ttl", dead: "server-a", candidate: "server-b", wantLeader: true, wantWithin: ttl + 3*time.Second, wantAfter: ttl - 500*time.Millisecond},
		{name: "takeover leaves a live leader of another identity leading", live: "server-b", dead: "server-a", candidate: "server-a", wantLeader: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			dead := embeddedtest.StartCandidate(t, e.etcd.Endpoint(), publish.DefaultPublisherElection, tc.dead, ttl)
			if tc.live != "" {
				embeddedtest.StartCandidate(t, e.etcd.Endpoint(), publish.DefaultPublisherElection, tc.live, 2*time.Second)
			}
			since := dead.Abandon(t)
			p := e.startPublisher(t, publish.PublisherConfig{Identity: tc.candidate, SessionTTL: ttl})
			if tc.live != "" {
				// The dead key goes at once and the live candidate, next in
				// line, leads from then on; the publisher waits behind it.
				for leader(t, e) != tc.live {
					if time.Since(since) > 2*time.Second {
						t.Fatalf("leader key %q 2s after the takeover, want %s's", leader(t, e), tc.live)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			took, led := waitLeader(p.p, since, ttl+2*time.Second)
			if led != tc.wantLeader {
				t.Fatalf("publisher %s led: %v (after %v), want %v", tc.candidate, led, took, tc.wantLeader)
			}
			if !led {
				return
			}
			if took > tc.wantWithin || took < tc.wantAfter {
				t.Errorf("publisher %s led %v after the dead %s's last renewal, want within [%v, %v]",
					tc.candidate, took, tc.dead, tc.wantAfter, tc.wantWithin)
			}
			t.Logf("led after %v", took)
			w := startWriter(t, e.cli, 0)
			time.Sleep(200 * time.Millisecond)
			w.halt()
			last, _ := w.lastRev()
			e.waitPublished(t, last)
			verifyOK(t, e)
		})
	}
}

// TestElectionDistinctIdentities runs two publishers of distinct
// identities under a write load and hands the role over twice: at no
// sample do both lead, and the log stays exactly once.
func TestElectionDistinctIdentities(t *testing.T) {
	e := newEnv(t)
	cfg := publish.PublisherConfig{SessionTTL: 2 * time.Second, MaxInFlight: 64}
	a := e.startPublisher(t, withIdentity(cfg, "server-a"))
	b := e.startPublisher(t, withIdentity(cfg, "server-b"))
	w := startWriter(t, e.cli, 0)
	both, samples := 0, 0
	sample := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
			samples++
			if a.p.IsLeader() && b.p.IsLeader() {
				both++
			}
		}
	}
	sample(500 * time.Millisecond)
	leader := a
	if b.p.IsLeader() {
		leader = b
	}
	leader.halt()
	sample(500 * time.Millisecond)
	// The stopped one comes back with its identity and waits in line.
	again := e.startPublisher(t, withIdentity(cfg, leader.p.Identity()))
	sample(500 * time.Millisecond)
	w.halt()
	if both > 0 {
		t.Errorf("both publishers led at %d of %d samples", both, samples)
	}
	if again.p.IsLeader() {
		t.Errorf("the restarted %s deposed the live leader", leader.p.Identity())
	}
	last, n := w.lastRev()
	e.waitPublished(t, last)
	rep := verifyOK(t, e)
	t.Logf("%d writes, %d events; %d samples", n, rep.Events, samples)
}

// leader is the value of the leading key of the publisher election.
func leader(t *testing.T, e *env) string {
	t.Helper()
	resp, err := e.cli.Get(context.Background(), publish.DefaultPublisherElection+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func withIdentity(cfg publish.PublisherConfig, id string) publish.PublisherConfig {
	cfg.Identity = id
	return cfg
}
