package scaleouttest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/events"
)

// readLog reads the whole CAIRN stream, as it is now.
func readLog(ctx context.Context, t *testing.T, js jetstream.JetStream) []*events.Event {
	t.Helper()
	var out []*events.Event
	if err := events.Tail(ctx, js, events.TailOptions{}, func(ev *events.Event) error {
		out = append(out, ev)
		return nil
	}); err != nil {
		t.Fatalf("read the log: %v", err)
	}
	if len(out) == 0 {
		t.Fatal("the log is empty")
	}
	return out
}

// history is the values a bound took, in log order.
type history []bound

type bound struct {
	rev events.Revision
	n   int
	// from is the revision the value was derived from: the revision of the
	// event its write reacted to (or the write's own).
	from events.Revision
}

// in is the value in force at rev (0 before the first).
func (h history) in(rev events.Revision) bound {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].rev <= rev {
			return h[i]
		}
	}
	return bound{}
}

// maxSince is the largest value in force at any revision from lo on.
func (h history) maxSince(lo events.Revision) int {
	m := h.in(lo).n
	for i := len(h) - 1; i >= 0 && h[i].rev > lo; i-- {
		m = max(m, h[i].n)
	}
	return m
}

type depState struct {
	key    string
	bounds history // spec.replicas + maxSurge
	live   int
	bad    bool // a problem was found: timeline prints its history
}

type rsState struct {
	key     string
	dep     types.UID
	specs   history // spec.replicas
	live    int
	creates int
	// needed is the sum of the increases of spec.replicas over the
	// ReplicaSet's life: the most pods it may create when nobody else
	// deletes its pods.
	needed  int
	maxSpec int
	// The creates of one sync (a slow-start batch) share a cause and end
	// with the sync's status write; runStart is the first one's revision.
	runOpen  bool
	runCause string
	runStart events.Revision
}

type podState struct {
	rs   types.UID
	live bool
}

// replay is the state of the Deployments, ReplicaSets and pods as the log
// has them at one revision.
type replay struct {
	deps  map[types.UID]*depState
	rsets map[types.UID]*rsState
	pods  map[string]*podState
	// revOf maps event ids to revisions, to place causes.
	revOf    map[string]events.Revision
	problems []string
	podAdds  int
	// rawOver counts pod creates after which a Deployment had more live
	// pods than spec.replicas + maxSurge.
	rawOver int
	// uncaused are the revisions of pod creates with no causationID.
	uncaused []events.Revision
}

func (r *replay) bad(format string, args ...any) {
	if len(r.problems) < 50 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

// causeRev is the revision of the event ev reacted to; ev's own if none is
// known.
func (r *replay) causeRev(ev *events.Event) events.Revision {
	if rev, ok := r.revOf[ev.CausationID]; ok && rev < ev.Revision {
		return rev
	}
	return ev.Revision
}

// checkLog replays the log and returns the invariants' violations, the
// number of pod creates seen, the ReplicaSets and the Deployments with a
// problem. causes are the revisions of events that are not on the log but
// are named as causes: the controller managers' marker Lease writes, on
// the lease stream, which a takeover's reconciles name.
//
// A pod create may be decided from a ReplicaSet a little older than the
// create (kube's slow-start batches go on after a scale-down), so the
// bounds it is held to are the largest in force from the revision of the
// event the create reacted to (its causationID) on, and for the
// Deployment, from the revision the ReplicaSet's spec was derived from.
func checkLog(log []*events.Event, causes map[string]events.Revision) (problems []string, podAdds, rawOver int, rsets map[types.UID]*rsState, badDeps []string) {
	r := &replay{deps: map[types.UID]*depState{}, rsets: map[types.UID]*rsState{}, pods: map[string]*podState{},
		revOf: maps.Clone(causes)}
	if r.revOf == nil {
		r.revOf = make(map[string]events.Revision, len(log))
	}
	for _, ev := range log {
		r.revOf[ev.ID] = ev.Revision
	}
	for _, ev := range log {
		if ev.Namespace != "default" {
			continue
		}
		var err error
		switch {
		case ev.Group == "apps" && ev.Resource == "deployments":
			err = r.deployment(ev)
		case ev.Group == "apps" && ev.Resource == "replicasets":
			err = r.replicaSet(ev)
		case ev.Group == "" && ev.Resource == "pods":
			err = r.pod(ev)
		}
		if err != nil {
			r.bad("revision %d: %s %s: %v", ev.Revision, ev.Resource, ev.Name, err)
		}
	}
	if n := len(r.uncaused); n > 0 {
		r.bad("%d of %d pod creates have no causationID, at revisions %v", n, r.podAdds, r.uncaused[:min(n, 20)])
	}
	for uid, rs := range r.rsets {
		if rs.creates > rs.needed {
			r.bad("ReplicaSet %s (%s): %d pods created, but its spec.replicas only ever rose by %d in all (max %d)",
				rs.key, uid, rs.creates, rs.needed, rs.maxSpec)
		}
	}
	for _, ds := range r.deps {
		if ds.bad {
			badDeps = append(badDeps, ds.key)
		}
	}
	sort.Strings(badDeps)
	return r.problems, r.podAdds, r.rawOver, r.rsets, badDeps
}

func (r *replay) deployment(ev *events.Event) error {
	if ev.Type == events.Deleted {
		return nil
	}
	var d appsv1.Deployment
	if err := json.Unmarshal(ev.Object, &d); err != nil {
		return err
	}
	ds := r.deps[d.UID]
	if ds == nil {
		ds = &depState{key: d.Name}
		r.deps[d.UID] = ds
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	surge := intstr.FromString("25%")
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil {
		surge = *ru.MaxSurge
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&surge, int(replicas), true)
	if err != nil {
		return err
	}
	ds.bounds = append(ds.bounds, bound{rev: ev.Revision, n: int(replicas) + n, from: ev.Revision})
	return nil
}

func (r *replay) replicaSet(ev *events.Event) error {
	if ev.Type == events.Deleted {
		return nil
	}
	var rs appsv1.ReplicaSet
	if err := json.Unmarshal(ev.Object, &rs); err != nil {
		return err
	}
	st := r.rsets[rs.UID]
	if st == nil {
		st = &rsState{key: rs.Name}
		r.rsets[rs.UID] = st
	}
	if strings.Contains(ev.Verb, "status") {
		st.runOpen = false
	}
	if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" {
		st.dep = ref.UID
	}
	replicas := 1
	if rs.Spec.Replicas != nil {
		replicas = int(*rs.Spec.Replicas)
	}
	prev := st.specs.in(ev.Revision)
	if replicas > prev.n {
		st.needed += replicas - prev.n
	}
	st.maxSpec = max(st.maxSpec, replicas)
	if len(st.specs) == 0 || replicas != prev.n {
		st.specs = append(st.specs, bound{rev: ev.Revision, n: replicas, from: r.causeRev(ev)})
	}
	if ds := r.deps[st.dep]; ds != nil && replicas > prev.n {
		// A scale-up must keep the sum of the ReplicaSets' spec.replicas
		// within spec.replicas + maxSurge (kube's NewRSNewReplicas).
		sum := 0
		for _, o := range r.rsets {
			if o.dep == st.dep {
				sum += o.specs.in(ev.Revision).n
			}
		}
		if allowed := ds.bounds.maxSince(r.causeRev(ev)); sum > allowed {
			ds.bad = true
			r.bad("revision %d: ReplicaSet %s scaled up to %d: Deployment %s's ReplicaSets want %d pods, spec.replicas+maxSurge allows %d",
				ev.Revision, st.key, replicas, ds.key, sum, allowed)
		}
	}
	return nil
}

func (r *replay) pod(ev *events.Event) error {
	var pod corev1.Pod
	if err := json.Unmarshal(ev.Object, &pod); err != nil {
		return err
	}
	key := pod.Name
	ps := r.pods[key]
	if ev.Type == events.Added {
		r.podAdds++
		if ev.Actor.User != controllerUser {
			r.bad("revision %d: pod %s created by %q, want %s", ev.Revision, key, ev.Actor.User, controllerUser)
		}
		if ev.CausationID == "" {
			r.uncaused = append(r.uncaused, ev.Revision)
		}
		ps = &podState{}
		r.pods[key] = ps
	}
	if ps == nil {
		return fmt.Errorf("%s event of a pod never added", ev.Type)
	}
	var owner types.UID
	if ref := metav1.GetControllerOf(&pod); ref != nil {
		owner = ref.UID
	}
	live := ev.Type != events.Deleted && pod.DeletionTimestamp == nil
	// Take the pod out with its old owner and state, put it back with the
	// new ones.
	r.count(ps.rs, ps.live, -1)
	ps.rs, ps.live = owner, live
	r.count(ps.rs, ps.live, +1)
	if ev.Type == events.Deleted {
		delete(r.pods, key)
	}
	if ev.Type != events.Added {
		return nil
	}
	// Pods only ever become live by being created.
	rs := r.rsets[owner]
	if rs == nil {
		r.bad("revision %d: pod %s created for unknown ReplicaSet %s", ev.Revision, key, owner)
		return nil
	}
	rs.creates++
	if !rs.runOpen || rs.runCause != ev.CausationID {
		rs.runOpen, rs.runCause, rs.runStart = true, ev.CausationID, ev.Revision
	}
	// The sync decided from a ReplicaSet as of its cause, or at the latest
	// as of its first create.
	lo := min(r.causeRev(ev), rs.runStart)
	ds := r.deps[rs.dep]
	if allowed := rs.specs.maxSince(lo); rs.live > allowed {
		if ds != nil {
			ds.bad = true
		}
		r.bad("revision %d: pod %s created: ReplicaSet %s now has %d live pods, spec.replicas allows %d (cause at %d)",
			ev.Revision, key, rs.key, rs.live, allowed, lo)
	}
	if ds == nil {
		return nil
	}
	from := min(lo, rs.specs.in(lo).from)
	bound := ds.bounds.maxSince(from)
	if ds.live > bound {
		// Not a violation by itself: kube bounds the sum of the
		// ReplicaSets' spec.replicas, and an old ReplicaSet's pods go some
		// time after its spec went down.
		r.rawOver++
	}
	wanted := 0
	for uid, o := range r.rsets {
		if o.dep != rs.dep {
			continue
		}
		spec := o.specs.in(ev.Revision).n
		if uid == owner {
			spec = o.specs.maxSince(lo)
		}
		wanted += min(o.live, spec)
	}
	if wanted > bound {
		ds.bad = true
		r.bad("revision %d: pod %s created: Deployment %s now has %d live pods its ReplicaSets want, spec.replicas+maxSurge allows %d (cause at %d, ReplicaSet spec from %d)",
			ev.Revision, key, ds.key, wanted, bound, lo, from)
	}
	return nil
}

// count adds d to the live pods of ReplicaSet uid and its Deployment.
func (r *replay) count(uid types.UID, live bool, d int) {
	rs := r.rsets[uid]
	if !live || rs == nil {
		return
	}
	rs.live += d
	if ds := r.deps[rs.dep]; ds != nil {
		ds.live += d
	}
}

// timeline describes the log's events of a Deployment, its ReplicaSets
// and their pods (by name prefix), for a failure message.
func timeline(log []*events.Event, dep string) string {
	var b strings.Builder
	n := 0
	for _, ev := range log {
		if ev.Namespace != "default" || ev.Name != dep && !strings.HasPrefix(ev.Name, dep+"-") {
			continue
		}
		if n++; n > 400 {
			b.WriteString("...\n")
			break
		}
		fmt.Fprintf(&b, "%d %s %s %s %s by %s cause %s: %s\n", ev.Revision, ev.Time.Format("15:04:05.000"), ev.Type, ev.Resource, ev.Name,
			ev.Actor.User, ev.CausationID, summary(ev))
	}
	return b.String()
}

// summary is the part of an event's object a timeline shows.
func summary(ev *events.Event) string {
	var o struct {
		Metadata struct {
			Generation        int64                   `json:"generation"`
			DeletionTimestamp *metav1.Time            `json:"deletionTimestamp"`
			Annotations       map[string]string       `json:"annotations"`
			OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
		Spec struct {
			Replicas *int32 `json:"replicas"`
		} `json:"spec"`
		Status json.RawMessage `json:"status"`
	}
	_ = json.Unmarshal(ev.Object, &o)
	s := fmt.Sprintf("gen %d", o.Metadata.Generation)
	if o.Spec.Replicas != nil {
		s += fmt.Sprintf(" spec.replicas %d", *o.Spec.Replicas)
	}
	if o.Metadata.DeletionTimestamp != nil {
		s += " deleting"
	}
	if rev := o.Metadata.Annotations["deployment.kubernetes.io/revision"]; rev != "" {
		s += " rev " + rev
	}
	if ev.Resource != "pods" {
		s += " status " + string(o.Status)
	}
	return s
}
