// Package historytest writes synthetic logs for the tests and benchmarks of
// the history projections: events published straight into a JetStream
// stream the way the publisher does (subject, Nats-Msg-Id, Cairn-Revision
// and Cairn-Type headers), without an apiserver. Gen makes the events,
// StartLog starts a log for them, Fill ingests them into a store.
// (services/cairn/clustertest runs a whole control plane instead.)
package historytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/services/embedded/embeddedtest"
)

// StartLog starts a NATS server with the log's streams for one test.
func StartLog(t testing.TB) jetstream.JetStream {
	t.Helper()
	n := embeddedtest.StartNATS(t)
	js, err := jetstream.New(n.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := events.EnsureStreams(t.Context(), js, events.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	return js
}

// Publish publishes evs in order, pipelined, and waits for every
// acknowledgement. Events that share the revision of the event before them
// are the extra objects of one transaction: their Nats-Msg-Id is
// "<revision>-<index>", as the publisher's.
func Publish(ctx context.Context, js jetstream.JetStream, evs []*events.Event) error {
	const window = 2000 // below the client's 4000 outstanding async publishes
	futs := make([]jetstream.PubAckFuture, 0, window)
	wait := func() error {
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return fmt.Errorf("historytest: publish: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futs = futs[:0]
		return nil
	}
	idx := 0
	for i, e := range evs {
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		id := e.Revision.String()
		if i > 0 && evs[i-1].Revision == e.Revision {
			idx++
		} else {
			idx = 0
		}
		if idx > 0 {
			id += "-" + strconv.Itoa(idx)
		}
		m := &nats.Msg{Subject: e.Subject(), Data: data, Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, id)
		m.Header.Set(events.MsgHeaderRevision, e.Revision.String())
		m.Header.Set(events.MsgHeaderType, string(e.Type))
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("historytest: publish: %w", err)
		}
		futs = append(futs, f)
		if len(futs) == window {
			if err := wait(); err != nil {
				return err
			}
		}
	}
	return wait()
}

// Gen generates a synthetic log: pods created, scheduled, started and
// deleted by users and components, with causation and correlation ids.
type Gen struct {
	Rev   events.Revision
	Start time.Time
	// Users are the human actors writes are spread over.
	Users []string
	inTxn bool // inside Txn
	txnN  int  // events made so far inside Txn
}

// NewGen starts a generator at revision 1.
func NewGen() *Gen {
	return &Gen{Rev: 1, Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		Users: []string{"alice", "bob", "carol", "dave"}}
}

// Skip leaves n revisions without an event, as etcd writes outside the
// API (elections, leases of the publisher) do.
func (g *Gen) Skip(n int) { g.Rev += events.Revision(n) }

// Txn returns the events f makes as one transaction: they share one
// revision, the first one's.
func (g *Gen) Txn(f func() []*events.Event) []*events.Event {
	g.inTxn, g.txnN = true, 0
	defer func() { g.inTxn = false }()
	return f()
}

// Event makes the next event; the object is a small pod-like document.
func (g *Gen) Event(typ events.Type, group, resource, kind, ns, name, uid, user, cause, corr string, obj map[string]any) *events.Event {
	idx := 0
	if g.inTxn {
		idx = g.txnN
		g.txnN++
	}
	if idx == 0 {
		g.Rev++
	}
	if obj == nil {
		obj = map[string]any{}
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	md["name"], md["namespace"], md["uid"] = name, ns, uid
	obj["kind"] = kind
	b, _ := json.Marshal(obj)
	// The resourceVersion goes where the publisher splices it.
	b = bytes.Replace(b, []byte(`"metadata":{`), []byte(`"metadata":{"resourceVersion":"`+g.Rev.String()+`",`), 1)
	id := fmt.Sprintf("ev-%d", g.Rev)
	if idx > 0 {
		id = fmt.Sprintf("ev-%d-%d", g.Rev, idx)
	}
	if corr == "" {
		corr = id
	}
	verb := map[events.Type]string{events.Added: "create", events.Modified: "update", events.Deleted: "delete"}[typ]
	return &events.Event{
		ID: id, Revision: g.Rev, Type: typ, Group: group, Version: "v1", Resource: resource, Kind: kind,
		Namespace: ns, Name: name, UID: uid, Object: b, Verb: verb, Actor: events.Actor{User: user},
		CausationID: cause, CorrelationID: corr, Time: g.Start.Add(time.Duration(g.Rev) * time.Millisecond),
	}
}

// PodLife is the life of one pod: created by the replicaset controller,
// bound by the scheduler (pods/binding), started by its kubelet
// (pods/status), deleted by a user.
func (g *Gen) PodLife(ns string, i int) []*events.Event {
	name := "pod-" + strconv.Itoa(i)
	uid := "uid-pod-" + strconv.Itoa(i)
	user := g.Users[i%len(g.Users)]
	a := g.Event(events.Added, "", "pods", "Pod", ns, name, uid, "system:kube-controller-manager", "", "", nil)
	b, c := g.bindAndStart(a, nil)
	d := g.Event(events.Deleted, "", "pods", "Pod", ns, name, uid, user, "", "",
		map[string]any{"spec": map[string]any{"nodeName": "node-1"}, "status": map[string]any{"phase": "Running"}})
	return []*events.Event{a, b, c, d}
}

// bindAndStart are the scheduler's binding of the pod a created (to
// node-1) and its kubelet's report that it runs, each caused by the one
// before. meta is the pod's metadata besides its name, namespace and uid.
func (g *Gen) bindAndStart(a *events.Event, meta map[string]any) (bound, started *events.Event) {
	obj := func(status map[string]any) map[string]any {
		o := map[string]any{"spec": map[string]any{"nodeName": "node-1"}}
		if meta != nil {
			o["metadata"] = maps.Clone(meta)
		}
		if status != nil {
			o["status"] = status
		}
		return o
	}
	bound = g.Event(events.Modified, "", "pods", "Pod", a.Namespace, a.Name, a.UID, "system:kube-scheduler", a.ID, a.CorrelationID, obj(nil))
	bound.Verb = "create binding"
	started = g.Event(events.Modified, "", "pods", "Pod", a.Namespace, a.Name, a.UID, "system:node:node-1", bound.ID, a.CorrelationID,
		obj(map[string]any{"phase": "Running"}))
	started.Verb = "update status"
	return bound, started
}

// Rollout is a Deployment created by a user (image busybox:1), its
// ReplicaSet and pods pods, each created, bound and started, linked by
// ownerReferences, causation and correlation ids as the real components
// link them.
func (g *Gen) Rollout(ns, name, user string, pods int) []*events.Event {
	depUID, rsUID := "uid-dep-"+name, "uid-rs-"+name
	owner := func(uid string) map[string]any {
		return map[string]any{"ownerReferences": []any{map[string]any{"uid": uid, "controller": true}}}
	}
	d := g.Event(events.Added, "apps", "deployments", "Deployment", ns, name, depUID, user, "", "",
		map[string]any{"spec": DeploymentSpec(pods, "busybox:1")})
	corr := d.CorrelationID
	rs := g.Event(events.Added, "apps", "replicasets", "ReplicaSet", ns, name+"-rs", rsUID, "system:kube-controller-manager", d.ID, corr,
		map[string]any{"metadata": owner(depUID)})
	out := []*events.Event{d, rs}
	for i := range pods {
		pn, pu := fmt.Sprintf("%s-rs-%d", name, i), fmt.Sprintf("uid-%s-pod-%d", name, i)
		a := g.Event(events.Added, "", "pods", "Pod", ns, pn, pu, "system:kube-controller-manager", rs.ID, corr,
			map[string]any{"metadata": owner(rsUID)})
		b, c := g.bindAndStart(a, owner(rsUID))
		out = append(out, a, b, c)
	}
	return out
}

// DeploymentSpec is the spec of a Deployment of replicas pods of one
// container running image.
func DeploymentSpec(replicas int, image string) map[string]any {
	return map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "app", "image": image}}}}}
}

// Fill publishes evs on a new log and returns a store that has ingested
// them all, closed at cleanup.
func Fill(t testing.TB, evs []*events.Event) *store.Store {
	t.Helper()
	js := StartLog(t)
	if err := Publish(t.Context(), js, evs); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "history.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := store.NewIngester(st, js, store.IngestConfig{}).CatchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}
