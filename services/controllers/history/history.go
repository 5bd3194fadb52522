package history

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
)

// HashLabel is the label carrying the hash of a ControllerRevision's Data
// (kube's ControllerRevisionHashLabel).
const HashLabel = "controller.kubernetes.io/hash"

// maxPrefix keeps PREFIX-HASH within 253 bytes.
const maxPrefix = 223

// ControllerRevisionName is prefix-hash, prefix cut to 223 bytes so that
// the name fits in 253.
func ControllerRevisionName(prefix, hash string) string {
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	return prefix + "-" + hash
}

// HashControllerRevision hashes revision's Data with FNV-32 and, if probe
// is not nil, the decimal value of *probe (a collision count), and renders
// the sum with rand.SafeEncodeString, as kube does. Data.Object, which
// only in-process callers set, is hashed by its JSON encoding (kube hashes
// a dump of the Go value); Data.Raw, what DaemonSets and StatefulSets
// store, hashes to kube's names.
func HashControllerRevision(revision *appsv1.ControllerRevision, probe *int32) string {
	hf := fnv.New32()
	if len(revision.Data.Raw) > 0 {
		hf.Write(revision.Data.Raw)
	}
	if revision.Data.Object != nil {
		if b, err := json.Marshal(revision.Data.Object); err == nil {
			hf.Write(b)
		}
	}
	if probe != nil {
		hf.Write([]byte(strconv.FormatInt(int64(*probe), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(hf.Sum32()))
}

// NewControllerRevision is a revision controlled by parent (of kind
// parentKind) with templateLabels, data and the revision number, named
// after parent and the hash of data with collisionCount
// (kube's NewControllerRevision). Its namespace is parent's.
func NewControllerRevision(parent metav1.Object, parentKind schema.GroupVersionKind, templateLabels map[string]string,
	data runtime.RawExtension, revision int64, collisionCount *int32) *appsv1.ControllerRevision {
	lbls := make(map[string]string, len(templateLabels)+1)
	for k, v := range templateLabels {
		lbls[k] = v
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       parent.GetNamespace(),
			Labels:          lbls,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(parent, parentKind)},
		},
		Data:     data,
		Revision: revision,
	}
	hash := HashControllerRevision(cr, collisionCount)
	cr.Name = ControllerRevisionName(parent.GetName(), hash)
	cr.Labels[HashLabel] = hash
	return cr
}

// SortControllerRevisions sorts revisions by Revision, then creation time,
// then name, stably.
func SortControllerRevisions(revisions []*appsv1.ControllerRevision) {
	slices.SortStableFunc(revisions, func(a, b *appsv1.ControllerRevision) int {
		switch {
		case a.Revision != b.Revision:
			return cmp.Compare(a.Revision, b.Revision)
		case !a.CreationTimestamp.Equal(&b.CreationTimestamp):
			if a.CreationTimestamp.Before(&b.CreationTimestamp) {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

// EqualRevision reports whether lhs and rhs are both nil, or both hold
// the same Data: hash labels that disagree make them different at once.
func EqualRevision(lhs, rhs *appsv1.ControllerRevision) bool {
	if lhs == nil || rhs == nil {
		return lhs == rhs
	}
	lh, lok := parseHash(lhs)
	rh, rok := parseHash(rhs)
	if lok && rok && lh != rh {
		return false
	}
	return bytes.Equal(lhs.Data.Raw, rhs.Data.Raw) && apiequality.Semantic.DeepEqual(lhs.Data.Object, rhs.Data.Object)
}

// parseHash reads the hash label as kube does: only a decimal value
// counts (SafeEncodeString output usually is not, so Data decides).
func parseHash(cr *appsv1.ControllerRevision) (uint32, bool) {
	hs, ok := cr.Labels[HashLabel]
	if !ok {
		return 0, false
	}
	h, err := strconv.ParseInt(hs, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(h), true
}

// FindEqualRevisions is the revisions equal to needle, in their order.
func FindEqualRevisions(revisions []*appsv1.ControllerRevision, needle *appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	var eq []*appsv1.ControllerRevision
	for _, r := range revisions {
		if EqualRevision(r, needle) {
			eq = append(eq, r)
		}
	}
	return eq
}

// NextRevision is one more than the highest Revision of revisions, 1 for
// none. revisions need not be sorted.
func NextRevision(revisions []*appsv1.ControllerRevision) int64 {
	var max int64
	for _, r := range revisions {
		if r.Revision > max {
			max = r.Revision
		}
	}
	return max + 1
}

// ErrNilCollisionCount is returned by Create without a collision count.
var ErrNilCollisionCount = errors.New("history: collisionCount should not be nil")

// ErrOwned is returned by Adopt for a revision another controller
// controls.
var ErrOwned = errors.New("history: revision is owned by another controller")

// Interface manages a controller's history (kube's history.Interface). It
// does not modify what it is given. Every call with a ctx writes through
// the apiserver with it.
type Interface interface {
	// List is the revisions in parent's namespace matching selector that
	// parent controls or that have no controller, from the cache.
	List(parent metav1.Object, selector labels.Selector) []*appsv1.ControllerRevision
	// Create creates revision as named by its Data and *collisionCount;
	// on a name taken by other Data it raises *collisionCount and tries
	// the next name. A name taken by the same Data returns that revision.
	Create(ctx context.Context, parent metav1.Object, revision *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error)
	// Update sets revision's Revision to newRevision, retrying conflicts.
	Update(ctx context.Context, revision *appsv1.ControllerRevision, newRevision int64) (*appsv1.ControllerRevision, error)
	// Delete deletes revision; one already gone is no error.
	Delete(ctx context.Context, revision *appsv1.ControllerRevision) error
	// Adopt makes parent (of kind parentKind) revision's controller;
	// ErrOwned if another controller has it.
	Adopt(ctx context.Context, parent metav1.Object, parentKind schema.GroupVersionKind, revision *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error)
	// Release removes parent from revision's owners. A revision that is
	// gone, or not parent's any more, gives nil, nil.
	Release(ctx context.Context, parent metav1.Object, revision *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error)
}
