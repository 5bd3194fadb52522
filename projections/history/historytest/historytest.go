// Package historytest writes synthetic logs for the tests and benchmarks of
// the history projections: events published straight into a JetStream
// stream the way the publisher does (subject, Nats-Msg-Id, Cairn-Revision
// and Cairn-Type headers), without an apiserver.
package historytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/events"
)

// Publish publishes evs in order, pipelined, and waits for every
// acknowledgement.
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
	for _, e := range evs {
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		m := &nats.Msg{Subject: e.Subject(), Data: data, Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, e.Revision.String())
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
	n     int
}

// NewGen starts a generator at revision 1.
func NewGen() *Gen {
	return &Gen{Rev: 1, Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		Users: []string{"alice", "bob", "carol", "dave"}}
}

// Event makes the next event; the object is a small pod-like document.
func (g *Gen) Event(typ events.Type, group, resource, kind, ns, name, uid, user, cause, corr string, obj map[string]any) *events.Event {
	g.Rev++
	g.n++
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
// bound by the scheduler, started by its kubelet, deleted by a user.
func (g *Gen) PodLife(ns string, i int) []*events.Event {
	name := "pod-" + strconv.Itoa(i)
	uid := "uid-pod-" + strconv.Itoa(i)
	user := g.Users[i%len(g.Users)]
	a := g.Event(events.Added, "", "pods", "Pod", ns, name, uid, "system:kube-controller-manager", "", "", nil)
	b := g.Event(events.Modified, "", "pods", "Pod", ns, name, uid, "system:kube-scheduler", a.ID, a.CorrelationID,
		map[string]any{"spec": map[string]any{"nodeName": "node-1"}})
	c := g.Event(events.Modified, "", "pods", "Pod", ns, name, uid, "system:node:node-1", b.ID, a.CorrelationID,
		map[string]any{"spec": map[string]any{"nodeName": "node-1"}, "status": map[string]any{"phase": "Running"}})
	d := g.Event(events.Deleted, "", "pods", "Pod", ns, name, uid, user, "", "",
		map[string]any{"spec": map[string]any{"nodeName": "node-1"}, "status": map[string]any{"phase": "Running"}})
	return []*events.Event{a, b, c, d}
}

// Rollout is a Deployment created by a user, its ReplicaSet and pods pods,
// each created, bound and started, linked by ownerReferences, causation and
// correlation ids as the real components link them.
func (g *Gen) Rollout(ns, name, user string, pods int) []*events.Event {
	depUID, rsUID := "uid-dep-"+name, "uid-rs-"+name
	owner := func(uid string) map[string]any {
		return map[string]any{"metadata": map[string]any{"ownerReferences": []any{map[string]any{"uid": uid, "controller": true}}}}
	}
	d := g.Event(events.Added, "apps", "deployments", "Deployment", ns, name, depUID, user, "", "",
		map[string]any{"spec": map[string]any{"replicas": pods}})
	corr := d.CorrelationID
	rs := g.Event(events.Added, "apps", "replicasets", "ReplicaSet", ns, name+"-rs", rsUID, "system:kube-controller-manager", d.ID, corr, owner(depUID))
	out := []*events.Event{d, rs}
	for i := range pods {
		pn, pu := fmt.Sprintf("%s-rs-%d", name, i), fmt.Sprintf("uid-%s-pod-%d", name, i)
		a := g.Event(events.Added, "", "pods", "Pod", ns, pn, pu, "system:kube-controller-manager", rs.ID, corr, owner(rsUID))
		bo := owner(rsUID)
		bo["spec"] = map[string]any{"nodeName": "node-1"}
		b := g.Event(events.Modified, "", "pods", "Pod", ns, pn, pu, "system:kube-scheduler", a.ID, corr, bo)
		co := owner(rsUID)
		co["spec"] = map[string]any{"nodeName": "node-1"}
		co["status"] = map[string]any{"phase": "Running"}
		c := g.Event(events.Modified, "", "pods", "Pod", ns, pn, pu, "system:node:node-1", b.ID, corr, co)
		out = append(out, a, b, c)
	}
	return out
}
