package publish_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/publish"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestPublisherPublishesEveryChange(t *testing.T) {
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	pub := e.startPublisher(t, publish.PublisherConfig{Registerer: reg})
	ctx := context.Background()
	cli := e.cli

	type want struct {
		rev           int64
		typ           events.Type
		kind, ns, nm  string
		node, user    string
		id, causation string
		correlation   string
	}
	var wants []want

	// A create by alice, an update by the scheduler that binds the pod
	// (caused by the create), a delete.
	k1 := events.RegistryKey("", "pods", "default", "web-0")
	m1 := meta(k1, "create", "alice")
	r1 := mustWrite(t, cli, k1, pod("default", "web-0", "", 1), m1)
	wants = append(wants, want{r1, events.Added, "Pod", "default", "web-0", "", "alice", m1.ID, "", m1.ID})

	m2 := meta(k1, "update", "system:kube-scheduler")
	m2.CausationID, m2.CorrelationID = m1.ID, m1.ID
	r2 := mustWrite(t, cli, k1, pod("default", "web-0", "node-1", 2), m2)
	wants = append(wants, want{r2, events.Modified, "Pod", "default", "web-0", "node-1", "system:kube-scheduler", m2.ID, m1.ID, m1.ID})

	// Not an API object: no event.
	if _, err := cli.Put(ctx, "/cairn/something", "x"); err != nil {
		t.Fatal(err)
	}
	// A cluster-scoped object written by someone other than the apiserver.
	k3 := events.RegistryKey("", "nodes", "", "node-1")
	pr, err := cli.Put(ctx, k3, object("v1", "Node", "", "node-1", nil))
	if err != nil {
		t.Fatal(err)
	}
	wants = append(wants, want{pr.Header.Revision, events.Added, "Node", "", "node-1", "", "", "", "", ""})

	// Leases go to their own stream.
	kl := events.RegistryKey("coordination.k8s.io", "leases", "kube-node-lease", "node-1")
	mustWrite(t, cli, kl, lease("kube-node-lease", "node-1", 1), meta(kl, "create", "system:node:node-1"))
	var lastLease int64
	for i := 2; i <= 5; i++ {
		lastLease = mustWrite(t, cli, kl, lease("kube-node-lease", "node-1", i), meta(kl, "update", "system:node:node-1"))
	}

	m4 := meta(k1, "delete", "bob")
	r4 := mustWrite(t, cli, k1, "", m4)
	wants = append(wants, want{r4, events.Deleted, "Pod", "default", "web-0", "node-1", "bob", m4.ID, "", m4.ID})

	e.waitPublished(t, r4)
	if got := pub.p.LastPublished(); got != events.Revision(r4) {
		t.Errorf("LastPublished = %d, want %d", got, r4)
	}

	got := tailAll(t, e.js, events.TailOptions{})
	if len(got) != len(wants) {
		for _, g := range got {
			t.Log(events.FormatLine(g))
		}
		t.Fatalf("got %d events on %s, want %d", len(got), events.Stream, len(wants))
	}
	for i, w := range wants {
		g := got[i]
		t.Run(string(w.typ)+"-"+w.nm, func(t *testing.T) {
			if int64(g.Revision) != w.rev || g.Type != w.typ || g.Kind != w.kind || g.Namespace != w.ns || g.Name != w.nm ||
				g.NodeName != w.node || g.Actor.User != w.user || g.Version != "v1" {
				t.Errorf("got %+v, want %+v", g, w)
			}
			if w.id != "" && g.ID != w.id {
				t.Errorf("id %q, want %q", g.ID, w.id)
			}
			if g.ID == "" {
				t.Error("empty id")
			}
			if g.CausationID != w.causation {
				t.Errorf("causation %q, want %q", g.CausationID, w.causation)
			}
			wc := w.correlation
			if wc == "" {
				wc = g.ID
			}
			if g.CorrelationID != wc {
				t.Errorf("correlation %q, want %q", g.CorrelationID, wc)
			}
			var obj struct {
				Kind     string
				Metadata struct{ ResourceVersion, UID, Name string }
				Spec     struct{ NodeName string }
			}
			if err := json.Unmarshal(g.Object, &obj); err != nil {
				t.Fatal(err)
			}
			if obj.Metadata.ResourceVersion != g.Revision.String() || obj.Kind != w.kind || obj.Metadata.Name != w.nm {
				t.Errorf("object %s", g.Object)
			}
			if g.UID != obj.Metadata.UID || g.UID == "" {
				t.Errorf("uid %q, object's %q", g.UID, obj.Metadata.UID)
			}
		})
	}
	// The delete carries the last state: bound to node-1.
	if !strings.Contains(string(got[len(got)-1].Object), `"nodeName":"node-1"`) {
		t.Errorf("delete without last state: %s", got[len(got)-1].Object)
	}

	// The kubelet's filter sees only its node's pod events.
	kubelet := tailAll(t, e.js, events.TailOptions{Resource: "pods", Node: "node-1"})
	if len(kubelet) != 2 || kubelet[0].Revision != events.Revision(r2) {
		t.Errorf("node-1 sees %d events, want 2 (update, delete)", len(kubelet))
	}

	// One message per lease on the lease stream: the latest.
	ls := tailAll(t, e.js, events.TailOptions{Group: "coordination.k8s.io", Resource: "leases"})
	if len(ls) != 1 || ls[0].Revision != events.Revision(lastLease) || ls[0].Kind != "Lease" {
		t.Errorf("lease stream: %d events, want the one at %d", len(ls), lastLease)
	}

	// Headers.
	s, err := e.js.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetMsg(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(jetstream.MsgIDHeader) != events.Revision(r2).String() ||
		msg.Header.Get(events.MsgHeaderRevision) != events.Revision(r2).String() ||
		msg.Header.Get(events.MsgHeaderType) != string(events.Modified) ||
		msg.Subject != "cairn.ev.core.pods.node-1.default.web-0._" {
		t.Errorf("message 2: subject %s headers %v", msg.Subject, msg.Header)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		seen[mf.GetName()] = true
	}
	for _, name := range []string{"cairn_log_publish_lag_seconds", "cairn_log_last_published_revision", "cairn_log_events_published_total"} {
		if !seen[name] {
			t.Errorf("metric %s not registered", name)
		}
	}
	verifyOK(t, e)
}

func TestPublisherMultiObjectTxn(t *testing.T) {
	e := newEnv(t)
	e.startPublisher(t, publish.PublisherConfig{})
	ctx := context.Background()
	ka := events.RegistryKey("", "configmaps", "ns", "a")
	kb := events.RegistryKey("", "configmaps", "ns", "b")
	m := meta(kb, "deletecollection", "carol")
	mb, _ := json.Marshal(m)
	resp, err := e.cli.Txn(ctx).Then(
		clientv3.OpPut(ka, object("v1", "ConfigMap", "ns", "a", nil)),
		clientv3.OpPut(kb, object("v1", "ConfigMap", "ns", "b", nil)),
		clientv3.OpPut(events.MetaKey, string(mb)),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	e.waitPublished(t, rev)
	got := waitEvents(t, e.js, 2)
	if len(got) != 2 {
		t.Fatalf("got %d events, want 2", len(got))
	}
	if got[0].Name != "a" || got[1].Name != "b" || got[1].ID != m.ID || got[0].ID == m.ID ||
		got[0].Actor.User != "carol" || got[0].CorrelationID != m.ID {
		t.Errorf("events %+v %+v", got[0], got[1])
	}
	s, _ := e.js.Stream(ctx, events.Stream)
	for seq, id := range map[uint64]string{1: events.Revision(rev).String(), 2: events.Revision(rev).String() + "-1"} {
		msg, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Header.Get(jetstream.MsgIDHeader) != id {
			t.Errorf("seq %d: Nats-Msg-Id %q, want %q", seq, msg.Header.Get(jetstream.MsgIDHeader), id)
		}
	}
	verifyOK(t, e)
}

// writer commits pod creates, updates and deletes and lease renewals until
// stopped, and remembers the last revision it wrote.
type writer struct {
	mu   sync.Mutex
	last int64
	n    int
	stop context.CancelFunc
	done chan struct{}
}

func startWriter(t *testing.T, cli *clientv3.Client, pause time.Duration) *writer {
	stopped, cancel := context.WithCancel(context.Background())
	w := &writer{stop: cancel, done: make(chan struct{})}
	// Writes are not cancelled by halt: a cancelled txn may still commit,
	// after the test thinks writes have stopped.
	ctx := context.Background()
	go func() {
		defer close(w.done)
		for i := 0; stopped.Err() == nil; i++ {
			name := "p" + itoa(i%40)
			key := events.RegistryKey("", "pods", "ns"+itoa(i%3), name)
			var obj string
			verb := "update"
			switch {
			case i%40 == i:
				verb = "create"
				obj = pod("ns"+itoa(i%3), name, "", i)
			case i%7 == 0:
				verb = "delete"
			case i%5 == 0:
				key = events.RegistryKey("coordination.k8s.io", "leases", "kube-node-lease", "node-"+itoa(i%4))
				obj = lease("kube-node-lease", "node-"+itoa(i%4), i)
			default:
				obj = pod("ns"+itoa(i%3), name, "node-"+itoa(i%4), i)
			}
			rev, err := write(ctx, cli, key, obj, meta(key, verb, "writer"))
			if err != nil && verb != "update" {
				// update of a deleted pod / delete of a deleted pod: recreate.
				verb = "create"
				obj = pod("ns"+itoa(i%3), name, "", i)
				rev, err = write(ctx, cli, key, obj, meta(key, verb, "writer"))
			}
			if err != nil {
				verb = "create"
				if obj == "" {
					obj = pod("ns"+itoa(i%3), name, "", i)
				}
				rev, err = write(ctx, cli, key, obj, meta(key, verb, "writer"))
			}
			if err == nil {
				w.mu.Lock()
				w.last, w.n = rev, w.n+1
				w.mu.Unlock()
			}
			if pause > 0 {
				time.Sleep(pause)
			}
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *writer) halt() {
	w.stop()
	<-w.done
}

func (w *writer) lastRev() (int64, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.n
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestPublisherFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		// depose ends the leader's term.
		depose func(t *testing.T, e *env, leader *running)
	}{
		{"leader stops", func(t *testing.T, e *env, leader *running) { leader.halt() }},
		{"leader session expires", func(t *testing.T, e *env, leader *running) {
			// The leader keeps running but loses its lease, as in a
			// partition: the fence on sequences must keep it from
			// interleaving with its successor.
			resp, err := e.cli.Get(context.Background(), publish.DefaultPublisherElection, clientv3.WithFirstCreate()...)
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range resp.Kvs {
				if _, err := e.cli.Revoke(context.Background(), clientv3.LeaseID(kv.Lease)); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			cfg := publish.PublisherConfig{SessionTTL: 2 * time.Second, MaxInFlight: 64}
			a := e.startPublisher(t, cfg)
			b := e.startPublisher(t, cfg)
			w := startWriter(t, e.cli, 0)
			deadline := time.Now().Add(10 * time.Second)
			for !a.p.IsLeader() && !b.p.IsLeader() {
				if time.Now().After(deadline) {
					t.Fatal("no leader")
				}
				time.Sleep(10 * time.Millisecond)
			}
			leader, other := a, b
			if b.p.IsLeader() {
				leader, other = b, a
			}
			time.Sleep(300 * time.Millisecond)
			before := leader.p.LastPublished()
			tc.depose(t, e, leader)
			deadline = time.Now().Add(15 * time.Second)
			for !other.p.IsLeader() || other.p.LastPublished() <= before {
				if time.Now().After(deadline) {
					t.Fatalf("no takeover: other leader=%v at %d", other.p.IsLeader(), other.p.LastPublished())
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			w.halt()
			last, n := w.lastRev()
			e.waitPublished(t, last)
			rep := verifyOK(t, e)
			t.Logf("%d writes, %d events, %d lease events; takeover after revision %d", n, rep.Events, rep.LeaseEvents, before)
		})
	}
}

// TestPublisherSplitBrain runs two publishers that both believe they lead
// (separate elections), the worst case a partition can produce: the
// sequence fence alone must keep the log exactly once.
func TestPublisherSplitBrain(t *testing.T) {
	e := newEnv(t)
	e.startPublisher(t, publish.PublisherConfig{ElectionPrefix: "/cairn/election/a", MaxInFlight: 32})
	e.startPublisher(t, publish.PublisherConfig{ElectionPrefix: "/cairn/election/b", MaxInFlight: 32})
	w := startWriter(t, e.cli, 0)
	time.Sleep(1500 * time.Millisecond)
	w.halt()
	last, n := w.lastRev()
	e.waitPublished(t, last)
	rep := verifyOK(t, e)
	t.Logf("%d writes, %d events, %d lease events", n, rep.Events, rep.LeaseEvents)
}

// TestPublisherResumesInsideARevision: a crash after the first event of a
// multi-object transaction was published; the next leader publishes only
// the rest.
func TestPublisherResumesInsideARevision(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	objs := map[string]string{}
	var ops []clientv3.Op
	for _, n := range []string{"a", "b", "c"} {
		objs[n] = object("v1", "ConfigMap", "ns", n, nil)
		ops = append(ops, clientv3.OpPut(events.RegistryKey("", "configmaps", "ns", n), objs[n]))
	}
	resp, err := e.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		t.Fatal(err)
	}
	rev := events.Revision(resp.Header.Revision)
	first := &events.Event{ID: "01J00000000000000000000000", Revision: rev, Type: events.Added, Version: "v1",
		Resource: "configmaps", Kind: "ConfigMap", Namespace: "ns", Name: "a", Object: json.RawMessage(objs["a"])}
	data, _ := json.Marshal(first)
	m := &nats.Msg{Subject: first.Subject(), Data: data, Header: nats.Header{}}
	m.Header.Set(events.MsgHeaderRevision, rev.String())
	if _, err := e.js.PublishMsg(ctx, m, jetstream.WithMsgID(rev.String())); err != nil {
		t.Fatal(err)
	}

	e.startPublisher(t, publish.PublisherConfig{})
	got := waitEvents(t, e.js, 3)
	if len(got) != 3 || got[0].ID != first.ID || got[1].Name != "b" || got[2].Name != "c" {
		t.Fatalf("got %d events", len(got))
	}
	verifyOK(t, e)
}

// waitEvents waits until CAIRN holds at least n events, and returns them.
func waitEvents(t *testing.T, js jetstream.JetStream, n int) []*events.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := tailAll(t, js, events.TailOptions{})
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPublisherPartitions: a controlled object's events go out on its
// controller's partition, except a change that may have moved it to
// another controller: one the apiserver flags (WriteMeta.Moved) and a
// foreign update, whose previous state nobody compared.
func TestPublisherPartitions(t *testing.T) {
	e := newEnv(t)
	e.startPublisher(t, publish.PublisherConfig{})
	ctx := context.Background()
	key := events.RegistryKey("", "pods", "ns", "web-1")
	controlled := object("v1", "Pod", "ns", "web-1", map[string]any{"metadata": map[string]any{
		"name": "web-1", "namespace": "ns", "ownerReferences": []any{map[string]any{"name": "web", "controller": true}}}})
	p := events.Partition("ns", "web")
	moved := meta(key, "update", "rs")
	moved.Moved = true
	steps := []struct {
		name      string
		obj       string
		m         *events.WriteMeta
		partition string
	}{
		{"create", controlled, ptr(meta(key, "create", "rs")), p},
		{"update", controlled, ptr(meta(key, "update", "rs")), p},
		{"moved", controlled, &moved, ""},
		{"foreign update", controlled, nil, ""},
		{"delete", "", ptr(meta(key, "delete", "rs")), p},
		{"orphan create", pod("ns", "web-1", "", 1), ptr(meta(key, "create", "rs")), ""},
	}
	var last int64
	for _, s := range steps {
		var err error
		if s.m == nil {
			var resp *clientv3.PutResponse
			resp, err = e.cli.Put(ctx, key, s.obj)
			if err == nil {
				last = resp.Header.Revision
			}
		} else {
			last, err = write(ctx, e.cli, key, s.obj, *s.m)
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	e.waitPublished(t, last)
	st, _ := e.js.Stream(ctx, events.Stream)
	for i, s := range steps {
		msg, err := st.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		k, _ := events.ParseSubject(msg.Subject)
		var ev events.Event
		if err := json.Unmarshal(msg.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if k.Partition != s.partition || ev.Partition != s.partition || ev.Subject() != msg.Subject {
			t.Errorf("%s: subject %s, envelope partition %q; want partition %q", s.name, msg.Subject, ev.Partition, s.partition)
		}
	}
	verifyOK(t, e)
}

func ptr[T any](v T) *T { return &v }
