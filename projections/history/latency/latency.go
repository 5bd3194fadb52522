// Package latency turns the history projection into Prometheus histograms
// of how long the control plane takes:
//
//   - cairn_pod_creation_to_scheduled_seconds: a pod's creation to the
//     event that set its spec.nodeName (the binding);
//   - cairn_pod_scheduled_to_running_seconds: the binding to the first
//     event with status.phase Running;
//   - cairn_deployment_apply_to_ready_seconds: the write that changed a
//     Deployment's spec (a new metadata.generation) to the first event
//     whose status shows that generation observed with every replica
//     updated, ready and available, and no old ones left.
//
// An Observer is a store.Observer: the ingester calls it for every stored
// event inside its write transaction. What it needs of earlier events
// (a pod's creation time, the time a generation was written) it reads from
// the store, so it survives restarts without state of its own; times come
// from the envelopes (when the apiserver made each write), so a rebuild
// from scratch observes the same durations as the live run did.
package latency

import (
	"encoding/json"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/store"
)

// Observer feeds the histograms.
type Observer struct {
	CreationToScheduled prometheus.Histogram
	ScheduledToRunning  prometheus.Histogram
	ApplyToReady        prometheus.Histogram
}

var _ store.Observer = (*Observer)(nil)

// New makes the histograms and registers them with reg (nil registers
// none).
func New(reg prometheus.Registerer) (*Observer, error) {
	buckets := prometheus.ExponentialBuckets(0.001, 2, 18) // 1 ms .. 131 s
	o := &Observer{
		CreationToScheduled: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cairn_pod_creation_to_scheduled_seconds", Buckets: buckets,
			Help: "Time from a pod's creation to its binding to a node, from the log.",
		}),
		ScheduledToRunning: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cairn_pod_scheduled_to_running_seconds", Buckets: buckets,
			Help: "Time from a pod's binding to its kubelet reporting it Running, from the log.",
		}),
		ApplyToReady: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cairn_deployment_apply_to_ready_seconds", Buckets: buckets,
			Help: "Time from a write of a Deployment's spec to all its replicas updated, ready and available, from the log.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{o.CreationToScheduled, o.ScheduledToRunning, o.ApplyToReady} {
			if err := reg.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					return nil, err
				}
			}
		}
	}
	return o, nil
}

// fields are what the observer reads of pods and deployments.
type fields struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
		Replicas *int32 `json:"replicas"`
	} `json:"spec"`
	Status struct {
		Phase              string `json:"phase"`
		ObservedGeneration int64  `json:"observedGeneration"`
		Replicas           int32  `json:"replicas"`
		UpdatedReplicas    int32  `json:"updatedReplicas"`
		ReadyReplicas      int32  `json:"readyReplicas"`
		AvailableReplicas  int32  `json:"availableReplicas"`
	} `json:"status"`
}

// Observe implements store.Observer.
func (o *Observer) Observe(tx *store.Tx, ix *store.Indexed) {
	e := ix.Event
	if e.Type == events.Deleted {
		return
	}
	switch {
	case e.Group == "" && e.Resource == "pods":
		o.pod(tx, ix)
	case e.Group == "apps" && e.Resource == "deployments":
		o.deployment(tx, ix)
	}
}

// previous decodes the event of the same object just before ix.
func previous(tx *store.Tx, ix *store.Indexed) (*events.Event, *fields) {
	h := tx.History(store.KeyOf(ix.Event), store.Pos{}, ix.Pos)
	if len(h) < 2 || h[len(h)-2].Type == events.Deleted {
		return nil, nil
	}
	prev, err := tx.Event(h[len(h)-2].Pos)
	if err != nil || prev.UID != ix.Event.UID {
		return nil, nil
	}
	var f fields
	if json.Unmarshal(prev.Object, &f) != nil {
		return nil, nil
	}
	return prev, &f
}

func (o *Observer) pod(tx *store.Tx, ix *store.Indexed) {
	e := ix.Event
	if e.Type == events.Added {
		return
	}
	var cur fields
	if json.Unmarshal(e.Object, &cur) != nil {
		return
	}
	prevEv, prev := previous(tx, ix)
	if prev == nil {
		return
	}
	switch {
	case prev.Spec.NodeName == "" && cur.Spec.NodeName != "":
		if first := firstEvent(tx, e.UID); first != nil && first.Type == events.Added {
			o.CreationToScheduled.Observe(e.Time.Sub(first.Time).Seconds())
		}
	case prev.Status.Phase != "Running" && cur.Status.Phase == "Running":
		if bound := boundAt(tx, e.UID, prevEv); bound != nil {
			o.ScheduledToRunning.Observe(e.Time.Sub(bound.Time).Seconds())
		}
	}
}

func firstEvent(tx *store.Tx, uid string) *events.Event {
	ps := tx.ByUID(uid)
	if len(ps) == 0 {
		return nil
	}
	e, err := tx.Event(ps[0])
	if err != nil {
		return nil
	}
	return e
}

// boundAt finds the event that set the pod's spec.nodeName: the first of
// its events with a node.
func boundAt(tx *store.Tx, uid string, fallback *events.Event) *events.Event {
	for _, p := range tx.ByUID(uid) {
		e, err := tx.Event(p)
		if err != nil {
			return nil
		}
		if e.NodeName != "" {
			return e
		}
	}
	return fallback
}

func (o *Observer) deployment(tx *store.Tx, ix *store.Indexed) {
	e := ix.Event
	var cur fields
	if json.Unmarshal(e.Object, &cur) != nil || cur.Spec.Replicas == nil {
		return
	}
	s, n := cur.Status, *cur.Spec.Replicas
	done := s.ObservedGeneration >= cur.Metadata.Generation && s.UpdatedReplicas == n &&
		s.ReadyReplicas == n && s.AvailableReplicas == n && s.Replicas == n
	if !done {
		return
	}
	// Only the first event that shows the generation done counts: the
	// previous one must not have.
	if _, prev := previous(tx, ix); prev != nil && prev.Metadata.Generation == cur.Metadata.Generation {
		ps := prev.Status
		if ps.ObservedGeneration >= prev.Metadata.Generation && ps.UpdatedReplicas == n &&
			ps.ReadyReplicas == n && ps.AvailableReplicas == n && ps.Replicas == n && prev.Spec.Replicas != nil && *prev.Spec.Replicas == n {
			return
		}
	}
	if w := generationWrite(tx, ix, cur.Metadata.Generation); w != nil {
		o.ApplyToReady.Observe(e.Time.Sub(w.Time).Seconds())
	}
}

// generationWrite is the first event of the object with generation gen:
// the write that changed its spec.
func generationWrite(tx *store.Tx, ix *store.Indexed, gen int64) *events.Event {
	h := tx.History(store.KeyOf(ix.Event), store.Pos{}, ix.Pos)
	var found *events.Event
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Type == events.Deleted {
			break
		}
		e, err := tx.Event(h[i].Pos)
		if err != nil || e.UID != ix.Event.UID {
			break
		}
		var f fields
		if json.Unmarshal(e.Object, &f) != nil || f.Metadata.Generation != gen {
			break
		}
		found = e
	}
	return found
}
