package timeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/projections/history/store"
)

// ErrNotFound means the store has no event of the object asked for.
var ErrNotFound = errors.New("timeline: object not found")

// Object is one row of a timeline: an object of the chain.
type Object struct {
	Kind      string `json:"kind"`
	Group     string `json:"group,omitempty"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Owner is the uid of the object's owner in the chain, if any.
	Owner string `json:"owner,omitempty"`
	// Role is "root" (the object asked for), "descendant" (owned, directly
	// or not, by the root), "ancestor" (owns the root) or "cause" (an
	// object on the causal path to the root's creation).
	Role  string `json:"role"`
	Depth int    `json:"depth"`
}

// Step is one change of one object of the chain.
type Step struct {
	Pos     store.Pos   `json:"pos"`
	Time    time.Time   `json:"time"`
	Object  int         `json:"object"` // index into Timeline.Objects
	Type    events.Type `json:"type"`
	Verb    string      `json:"verb"`
	Actor   string      `json:"actor"`
	EventID string      `json:"eventID"`
	Class   string      `json:"class"`
	What    string      `json:"what"`
	Diff    []Change    `json:"diff,omitempty"`
	// Cause is the step this one reacted to: the event named by its
	// causation id when the store has it, else the previous step of the
	// same object. -1 for none.
	Cause int `json:"cause"`
	// CauseKind tells how Cause was found: "causation" or "previous".
	CauseKind string `json:"causeKind,omitempty"`
	// LatencyMS is the time from the cause to this step.
	LatencyMS float64 `json:"latencyMs"`
	// CorrelationID is the root of the chain this step belongs to.
	CorrelationID string `json:"correlationID,omitempty"`
	// MutatedBy names the admission webhooks that changed the object on
	// this write (events.Admission.MutatedBy).
	MutatedBy []string `json:"mutatedBy,omitempty"`

	causation string
}

// Timeline is the life of an object and of its causal chain, steps in log
// (and so causal) order.
type Timeline struct {
	Root    store.ObjKey    `json:"root"`
	Objects []Object        `json:"objects"`
	Steps   []Step          `json:"steps"`
	Head    events.Revision `json:"head"`
	// Origin is the index of the step that started the root's chain (the
	// user write at the root of its correlation id), -1 if unknown.
	Origin int `json:"origin"`
}

// Options select the object of a timeline.
type Options struct {
	Key store.ObjKey
	// UID picks one incarnation of a name that was deleted and created
	// again; default the latest.
	UID string
	// MaxDepth bounds the walk down the ownership tree; default 3
	// (Deployment -> ReplicaSet -> Pod).
	MaxDepth int
	// DiffLimit bounds the changes shown per step; default 12.
	DiffLimit int
}

// builder collects objects and steps in one read transaction.
type builder struct {
	tx     *store.Tx
	opts   Options
	t      *Timeline
	objAt  map[string]int    // uid -> object index
	stepAt map[store.Pos]int // pos -> step index
}

// Build makes the timeline of opts.Key from the store.
func Build(tx *store.Tx, opts Options) (*Timeline, error) {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = 3
	}
	if opts.DiffLimit <= 0 {
		opts.DiffLimit = 12
	}
	b := &builder{tx: tx, opts: opts, t: &Timeline{Root: opts.Key, Head: tx.Progress().Rev, Origin: -1},
		objAt: map[string]int{}, stepAt: map[store.Pos]int{}}
	uid := opts.UID
	if uid == "" {
		last, ok := tx.LatestAt(opts.Key, tx.Progress().Rev)
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, opts.Key)
		}
		s, err := tx.Summary(last.Pos)
		if err != nil {
			return nil, err
		}
		uid = s.UID
	}
	if err := b.addObject(uid, "", "root", 0); err != nil {
		return nil, err
	}
	if err := b.descend(uid, 1); err != nil {
		return nil, err
	}
	if err := b.ascend(uid); err != nil {
		return nil, err
	}
	b.link()
	return b.t, nil
}

// addObject adds a row and every event of the object as steps.
func (b *builder) addObject(uid, owner, role string, depth int) error {
	if _, ok := b.objAt[uid]; ok {
		return nil
	}
	positions := b.tx.ByUID(uid)
	if len(positions) == 0 {
		return fmt.Errorf("%w: uid %s", ErrNotFound, uid)
	}
	first, err := b.tx.Summary(positions[0])
	if err != nil {
		return err
	}
	b.objAt[uid] = len(b.t.Objects)
	b.t.Objects = append(b.t.Objects, Object{Kind: first.Kind, Group: first.Group, Resource: first.Resource,
		Namespace: first.Namespace, Name: first.Name, UID: uid, Owner: owner, Role: role, Depth: depth})
	var prev []byte
	for _, p := range positions {
		e, err := b.tx.Event(p)
		if err != nil {
			return err
		}
		b.addStep(p, e, prev)
		prev = e.Object
	}
	return nil
}

func (b *builder) addStep(p store.Pos, e *events.Event, prev []byte) {
	if _, ok := b.stepAt[p]; ok {
		return
	}
	var changes []Change
	if e.Type == events.Modified {
		changes = Diff(prev, e.Object, b.opts.DiffLimit)
	}
	class, what := classify(string(e.Type), e.Resource, factsOf(prev), factsOf(e.Object), changes)
	s := Step{Pos: p, Time: e.Time, Object: b.objAt[e.UID], Type: e.Type, Verb: store.VerbOf(e),
		Actor: e.Actor.User, EventID: e.ID, Class: class, What: what, Diff: changes, Cause: -1,
		CorrelationID: e.CorrelationID, causation: e.CausationID}
	if e.Admission != nil {
		s.MutatedBy = e.Admission.MutatedBy
	}
	b.stepAt[p] = len(b.t.Steps)
	b.t.Steps = append(b.t.Steps, s)
}

// descend adds the objects owned by uid, depth first.
func (b *builder) descend(uid string, depth int) error {
	if depth > b.opts.MaxDepth {
		return nil
	}
	for _, child := range b.tx.Children(uid) {
		if err := b.addObject(child, uid, "descendant", depth); err != nil {
			return err
		}
		if err := b.descend(child, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// ascend adds the owners of uid (from its first event's ownerReferences)
// and the events on the causal path to its creation: each event's cause,
// then that one's, up to the write that started the chain.
func (b *builder) ascend(uid string) error {
	positions := b.tx.ByUID(uid)
	first, err := b.tx.Event(positions[0])
	if err != nil {
		return err
	}
	owner := uid
	obj := first.Object
	for depth := -1; depth >= -b.opts.MaxDepth; depth-- {
		ref := controllerRef(obj)
		if _, ok := b.tx.KeyOfUID(ref); ref == "" || !ok {
			break
		}
		if _, seen := b.objAt[ref]; !seen {
			b.objAt[ref] = len(b.t.Objects)
			f := b.firstSummary(ref)
			b.t.Objects = append(b.t.Objects, Object{Kind: f.Kind, Group: f.Group, Resource: f.Resource,
				Namespace: f.Namespace, Name: f.Name, UID: ref, Role: "ancestor", Depth: depth})
			b.t.Objects[b.objAt[owner]].Owner = ref
		}
		owner = ref
		e, err := b.tx.Event(b.tx.ByUID(ref)[0])
		if err != nil {
			return err
		}
		obj = e.Object
	}
	return b.causalPath(first)
}

func (b *builder) firstSummary(uid string) store.Summary {
	s, _ := b.tx.Summary(b.tx.ByUID(uid)[0])
	return s
}

// causalPath adds the causes of e, transitively, and the root of its
// correlation, as steps of their objects' rows.
func (b *builder) causalPath(e *events.Event) error {
	id := e.CausationID
	for range 32 {
		if id == "" {
			break
		}
		p, ok := b.tx.ByID(id)
		if !ok {
			break
		}
		c, err := b.tx.Event(p)
		if err != nil {
			return err
		}
		b.ensureRow(c)
		b.addStep(p, c, b.prevObject(c, p))
		id = c.CausationID
	}
	if p, ok := b.tx.ByID(e.CorrelationID); ok {
		c, err := b.tx.Event(p)
		if err != nil {
			return err
		}
		b.ensureRow(c)
		b.addStep(p, c, b.prevObject(c, p))
	}
	return nil
}

// ensureRow adds a row for the object of a cause event that is not in the
// chain yet.
func (b *builder) ensureRow(e *events.Event) {
	if _, ok := b.objAt[e.UID]; ok {
		return
	}
	b.objAt[e.UID] = len(b.t.Objects)
	b.t.Objects = append(b.t.Objects, Object{Kind: e.Kind, Group: e.Group, Resource: e.Resource,
		Namespace: e.Namespace, Name: e.Name, UID: e.UID, Role: "cause", Depth: -1})
}

// prevObject is the object before the event at p (for its diff).
func (b *builder) prevObject(e *events.Event, p store.Pos) []byte {
	var prev []byte
	for _, q := range b.tx.ByUID(e.UID) {
		if !q.Less(p) {
			break
		}
		prev = nil
		if x, err := b.tx.Event(q); err == nil {
			prev = x.Object
		}
	}
	return prev
}

// link sorts the steps into log order and resolves each step's cause and
// latency, and the origin of the root's chain.
func (b *builder) link() {
	t := b.t
	sort.Slice(t.Steps, func(i, j int) bool { return t.Steps[i].Pos.Less(t.Steps[j].Pos) })
	at := map[string]int{}
	for i, s := range t.Steps {
		at[s.EventID] = i
	}
	lastOf := map[int]int{}
	for i := range t.Steps {
		s := &t.Steps[i]
		if c, ok := at[s.causation]; ok && c < i {
			s.Cause, s.CauseKind = c, "causation"
		} else if p, ok := lastOf[s.Object]; ok {
			s.Cause, s.CauseKind = p, "previous"
		}
		if s.Cause >= 0 {
			s.LatencyMS = float64(s.Time.Sub(t.Steps[s.Cause].Time).Microseconds()) / 1000
		}
		lastOf[s.Object] = i
	}
	for _, s := range t.Steps {
		if s.Object == 0 {
			if i, ok := at[s.CorrelationID]; ok {
				t.Origin = i
			}
			break
		}
	}
}

// controllerRef is the uid of an object's controller owner (or first
// owner).
func controllerRef(obj []byte) string {
	var o struct {
		Metadata struct {
			OwnerReferences []struct {
				UID        string `json:"uid"`
				Controller *bool  `json:"controller"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if json.Unmarshal(obj, &o) != nil || len(o.Metadata.OwnerReferences) == 0 {
		return ""
	}
	for _, r := range o.Metadata.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return r.UID
		}
	}
	return o.Metadata.OwnerReferences[0].UID
}
