package publish

import (
	"github.com/cairn-dev/cairn/events"

	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-dev/cairn/schemas/codec"
)

// outMsg is one event ready to publish.
type outMsg struct {
	pos    events.Position
	stream string
	key    string
	ev     *events.Event
	msg    *nats.Msg
	// metaTime is events.WriteMeta.Time, zero for foreign writes (lag unknown).
	metaTime time.Time
}

// nextRevision splits etcd changes, in revision order, into the revision
// of the first, the changes of that revision, and the rest.
func nextRevision(evs []*clientv3.Event) (rev events.Revision, first, rest []*clientv3.Event) {
	n := 1
	for n < len(evs) && evs[n].Kv.ModRevision == evs[0].Kv.ModRevision {
		n++
	}
	return events.Revision(evs[0].Kv.ModRevision), evs[:n], evs[n:]
}

// buildRevision turns the etcd changes of one revision into its events, in
// the order of the transaction's operations. The result depends only on the
// changes (except ids and times of foreign writes), so a publisher that
// restarts in the middle of a revision rebuilds the same positions.
func buildRevision(rev events.Revision, evs []*clientv3.Event) ([]*outMsg, error) {
	var meta *events.WriteMeta
	var objs []*clientv3.Event
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		switch {
		case key == events.MetaKey && ev.Type == mvccpb.PUT:
			// Unreadable metadata is published as a foreign write rather
			// than stopping the log.
			var m events.WriteMeta
			if codec.Unmarshal(ev.Kv.Value, &m) == nil {
				meta = &m
			}
		case strings.HasPrefix(key, events.RegistryPrefix):
			if _, _, _, _, ok := events.ParseRegistryKey(key); ok {
				objs = append(objs, ev)
			}
		}
	}
	if len(objs) == 0 {
		return nil, nil
	}
	// The metadata belongs to the object its Key names; other objects of the
	// same transaction share actor and causation but get their own ids.
	owner := 0
	if meta != nil && meta.Key != "" {
		for i, ev := range objs {
			if string(ev.Kv.Key) == meta.Key {
				owner = i
				break
			}
		}
	}
	out := make([]*outMsg, 0, len(objs))
	for i, ev := range objs {
		m, err := buildEvent(rev, ev, meta, i == owner)
		if err != nil {
			return nil, err
		}
		m.pos = events.Position{Rev: rev, Index: i}
		out = append(out, m)
	}
	return out, nil
}

func buildEvent(rev events.Revision, ev *clientv3.Event, meta *events.WriteMeta, owner bool) (*outMsg, error) {
	key := string(ev.Kv.Key)
	group, resource, namespace, name, _ := events.ParseRegistryKey(key)
	e := &events.Event{
		Revision:  rev,
		Group:     group,
		Resource:  resource,
		Namespace: namespace,
		Name:      name,
	}
	var raw []byte
	switch {
	case ev.Type == mvccpb.DELETE:
		e.Type = events.Deleted
		if ev.PrevKv != nil {
			raw = ev.PrevKv.Value
		}
	case ev.Kv.CreateRevision == ev.Kv.ModRevision:
		e.Type = events.Added
		raw = ev.Kv.Value
	default:
		e.Type = events.Modified
		raw = ev.Kv.Value
	}
	controller, err := fillObject(e, raw)
	if err != nil {
		return nil, fmt.Errorf("publish: revision %d key %s: %w", rev, key, err)
	}
	// A change may move the object to another controller; only the
	// apiserver, which has the previous state, can tell (events.WriteMeta.Moved).
	// Where it cannot, the event goes out on events.Empty, which every partition's
	// consumers receive.
	if e.Type != events.Modified || meta != nil && owner && !meta.Moved {
		e.Partition = events.Partition(namespace, controller)
	}
	m := &outMsg{stream: events.Stream, key: key, ev: e}
	if events.IsLease(group, resource) {
		m.stream = events.LeaseStream
	}
	if meta != nil {
		e.Verb = meta.Verb
		e.Actor = meta.Actor
		e.AuditID = meta.AuditID
		e.CausationID = meta.CausationID
		e.CorrelationID = meta.CorrelationID
		e.SourceIP = meta.SourceIP
		if owner {
			e.Admission = meta.Admission
		}
		e.Time = meta.Time
		m.metaTime = meta.Time
		if owner && meta.ID != "" {
			e.ID = meta.ID
		}
		if e.CorrelationID == "" {
			e.CorrelationID = meta.ID
		}
	} else {
		e.Time = time.Now().UTC()
	}
	if e.ID == "" {
		e.ID = ulid.Make().String()
	}
	if e.CorrelationID == "" {
		e.CorrelationID = e.ID
	}
	data, err := encodeEnvelope(e)
	if err != nil {
		return nil, err
	}
	m.msg = &nats.Msg{Subject: e.Subject(), Data: data, Header: nats.Header{}}
	m.msg.Header.Set(events.MsgHeaderRevision, rev.String())
	m.msg.Header.Set(events.MsgHeaderType, string(e.Type))
	return m, nil
}

// fillObject sets Object (with metadata.resourceVersion = events.Revision), Kind,
// Version, UID and, for pods, NodeName from the stored JSON, and returns
// the name of the object's controller owner. A value that is not a JSON
// object is carried as JSON null.
func fillObject(e *events.Event, raw []byte) (controller string, err error) {
	if len(raw) == 0 {
		e.Object = json.RawMessage("null")
		return "", nil
	}
	if controller, ok := fillObjectFast(e, raw); ok {
		return controller, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		e.Object = json.RawMessage("null")
		return "", nil
	}
	var apiVersion string
	_ = json.Unmarshal(top["apiVersion"], &apiVersion)
	_ = json.Unmarshal(top["kind"], &e.Kind)
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		e.Version = apiVersion[i+1:]
	} else {
		e.Version = apiVersion
	}
	md := map[string]json.RawMessage{}
	if b, ok := top["metadata"]; ok {
		if err := json.Unmarshal(b, &md); err != nil || md == nil {
			md = map[string]json.RawMessage{}
		}
	}
	_ = json.Unmarshal(md["uid"], &e.UID)
	var refs ownerRefs
	_ = json.Unmarshal(md["ownerReferences"], &refs)
	if e.Group == "" && e.Resource == "pods" {
		var spec struct {
			NodeName string `json:"nodeName"`
		}
		_ = json.Unmarshal(top["spec"], &spec)
		e.NodeName = spec.NodeName
	}
	rv, _ := json.Marshal(e.Revision.String())
	md["resourceVersion"] = rv
	b, err := json.Marshal(md)
	if err != nil {
		return "", fmt.Errorf("encode metadata: %w", err)
	}
	top["metadata"] = b
	obj, err := json.Marshal(top)
	if err != nil {
		return "", fmt.Errorf("encode object: %w", err)
	}
	e.Object = obj
	return refs.controller(), nil
}

// ownerRefs is what the publisher reads of metadata.ownerReferences.
type ownerRefs []struct {
	Name       string `json:"name"`
	Controller *bool  `json:"controller"`
}

// controller is the name of the controller owner, "" if none.
func (r ownerRefs) controller() string {
	for _, ref := range r {
		if ref.Controller != nil && *ref.Controller {
			return ref.Name
		}
	}
	return ""
}

// objectHead is what the publisher reads of a stored object.
type objectHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		UID             string    `json:"uid"`
		ResourceVersion string    `json:"resourceVersion"`
		OwnerReferences ownerRefs `json:"ownerReferences"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
}

var metadataOpen = []byte(`"metadata":{`)

// fillObjectFast is fillObject for the values the apiserver writes: JSON
// with a top-level metadata object that comes before any nested object and
// has no resourceVersion. It reads the document once and splices the
// resourceVersion in, instead of rebuilding it. It reports false (and
// changes nothing) for anything else.
func fillObjectFast(e *events.Event, raw []byte) (controller string, ok bool) {
	var h objectHead
	if codec.Unmarshal(raw, &h) != nil || h.Metadata.ResourceVersion != "" {
		return "", false
	}
	i := bytes.Index(raw, metadataOpen)
	if i < 0 || bytes.IndexByte(raw[1:], '{')+1 < i+len(metadataOpen)-1 {
		// A nested object opens before "metadata": it may not be the
		// top-level one.
		return "", false
	}
	at := i + len(metadataOpen)
	rv := `"resourceVersion":"` + e.Revision.String() + `"`
	if at < len(raw) && raw[at] != '}' {
		rv += ","
	}
	obj := make([]byte, 0, len(raw)+len(rv))
	obj = append(obj, raw[:at]...)
	obj = append(obj, rv...)
	obj = append(obj, raw[at:]...)
	e.Object = obj
	e.Kind = h.Kind
	if j := strings.LastIndexByte(h.APIVersion, '/'); j >= 0 {
		e.Version = h.APIVersion[j+1:]
	} else {
		e.Version = h.APIVersion
	}
	e.UID = h.Metadata.UID
	if e.Group == "" && e.Resource == "pods" {
		e.NodeName = h.Spec.NodeName
	}
	return h.Metadata.OwnerReferences.controller(), true
}

var nullObject = []byte(`"object":null`)

// encodeEnvelope marshals an event without re-validating its object: the
// object is already JSON (fillObject made it), so it is spliced in.
func encodeEnvelope(e *events.Event) ([]byte, error) {
	obj := e.Object
	e.Object = nil
	head, err := json.Marshal(e)
	e.Object = obj
	if err != nil {
		return nil, fmt.Errorf("publish: encode event: %w", err)
	}
	// Every field before object is a string or number, so the first
	// `"object":null` is the field itself, never text inside a value.
	i := bytes.Index(head, nullObject)
	if i < 0 {
		return nil, fmt.Errorf("publish: encode event: object field not found")
	}
	if len(obj) == 0 {
		obj = json.RawMessage("null")
	}
	out := make([]byte, 0, len(head)+len(obj))
	out = append(out, head[:i+len(`"object":`)]...)
	out = append(out, obj...)
	out = append(out, head[i+len(nullObject):]...)
	return out, nil
}
