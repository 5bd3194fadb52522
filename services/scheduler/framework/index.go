package framework

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// The Snapshot's indexes, kept current by AddPod, RemovePod and AddNode,
// let the inter-pod affinity and topology spread plugins visit only the
// pods and terms that can concern the pod being scheduled, instead of every
// pod of the cluster (kube-scheduler keeps per-node lists and walks every
// node; here the walk is over the matching pods only):
//
//   - pods by (namespace, label key=value): EachPodMatching picks, among
//     the equality (=, ==, in) requirements of a selector, the one with the
//     fewest pods and checks only those pods against the whole selector; a
//     selector without one (exists, notin, ...) walks the namespace's pods;
//   - the affinity terms of placed pods, each filed under the (namespace,
//     key=value) its selector requires, or as unindexed: EachAntiAffinityTerm
//     and EachScoringTerm look up the incoming pod's labels and check only
//     the terms filed there;
//   - node labels interned as small integers (topology.go), which the
//     plugins count domains by.
//
// Topology values are read from the node at query time, so a change of a
// node's labels needs no re-indexing of its pods.

// labelKey is one label value in one namespace (allNamespaces for terms that
// select every namespace).
type labelKey struct{ ns, key, value string }

// allNamespaces files terms that select pods of every namespace; no pod
// lives in the namespace "".
const allNamespaces = ""

// podSet maps pods to the node they are counted on.
type podSet map[*PodInfo]*NodeInfo

// podIndex finds pods by label and by namespace.
type podIndex struct {
	byLabel     map[labelKey]podSet
	byNamespace map[string]podSet
}

func newPodIndex() podIndex {
	return podIndex{byLabel: map[labelKey]podSet{}, byNamespace: map[string]podSet{}}
}

func (x *podIndex) add(pi *PodInfo, ni *NodeInfo) {
	ns := pi.Pod.Namespace
	addTo(x.byNamespace, ns, pi, ni)
	for k, v := range pi.Pod.Labels {
		addTo(x.byLabel, labelKey{ns, k, v}, pi, ni)
	}
}

func (x *podIndex) remove(pi *PodInfo) {
	ns := pi.Pod.Namespace
	removeFrom(x.byNamespace, ns, pi)
	for k, v := range pi.Pod.Labels {
		removeFrom(x.byLabel, labelKey{ns, k, v}, pi)
	}
}

func addTo[K comparable](m map[K]podSet, k K, pi *PodInfo, ni *NodeInfo) {
	set := m[k]
	if set == nil {
		set = podSet{}
		m[k] = set
	}
	set[pi] = ni
}

func removeFrom[K comparable](m map[K]podSet, k K, pi *PodInfo) {
	if set := m[k]; set != nil {
		delete(set, pi)
		if len(set) == 0 {
			delete(m, k)
		}
	}
}

// equalityRequirements are the requirements of sel a matching pod must
// satisfy with one of a few exact values (=, ==, in); ok is false when sel
// selects nothing.
func equalityRequirements(sel labels.Selector) (reqs []labels.Requirement, ok bool) {
	all, selectable := sel.Requirements()
	if !selectable {
		return nil, false
	}
	for _, r := range all {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			reqs = append(reqs, r)
		}
	}
	return reqs, true
}

// values are the distinct values of an equality requirement ("in (x, x)"
// is valid).
func values(r *labels.Requirement) []string {
	vs := r.ValuesUnsorted()
	if len(vs) < 2 {
		return vs
	}
	return r.Values().UnsortedList()
}

// termNamespaces lists the namespaces a term selects, allNamespaces alone
// for every namespace.
func termNamespaces(t *AffinityTerm) []string {
	if t.AllNamespaces {
		return []string{allNamespaces}
	}
	out := make([]string, 0, len(t.Namespaces))
	for ns := range t.Namespaces {
		out = append(out, ns)
	}
	return out
}

// EachPodMatching calls fn for every pod counted on an existing node
// (ni.Node != nil) that t selects (t.Matches); t.TopologyKey is not used.
// fn must not change the snapshot.
func (s *Snapshot) EachPodMatching(t *AffinityTerm, fn func(*NodeInfo, *PodInfo)) {
	reqs, ok := equalityRequirements(t.Selector)
	if !ok {
		return
	}
	var nss []string
	if t.AllNamespaces {
		nss = make([]string, 0, len(s.pods.byNamespace))
		for ns := range s.pods.byNamespace {
			nss = append(nss, ns)
		}
	} else {
		nss = termNamespaces(t)
	}
	// With a single (equality) requirement, being filed under it is
	// matching: the check is skipped.
	all, _ := t.Selector.Requirements()
	exact := len(all) == 1 && len(reqs) == 1
	visit := func(set podSet) {
		for pi, ni := range set {
			if ni.Node != nil && (exact || t.Matches(pi.Pod)) {
				fn(ni, pi)
			}
		}
	}
	// The equality requirement with the fewest candidate pods, if any.
	best, bestSize := -1, 0
	for i := range reqs {
		size := 0
		for _, ns := range nss {
			for _, v := range values(&reqs[i]) {
				size += len(s.pods.byLabel[labelKey{ns, reqs[i].Key(), v}])
			}
		}
		if best < 0 || size < bestSize {
			best, bestSize = i, size
		}
	}
	for _, ns := range nss {
		if best < 0 {
			exact = len(all) == 0 // the empty selector: every pod
			visit(s.pods.byNamespace[ns])
			continue
		}
		// A pod has one value per key: the sets are disjoint.
		for _, v := range values(&reqs[best]) {
			visit(s.pods.byLabel[labelKey{ns, reqs[best].Key(), v}])
		}
	}
}

// TermKind says which of a pod's affinity terms a PlacedTerm is.
type TermKind int8

// Kinds of terms.
const (
	RequiredAffinity TermKind = iota
	RequiredAntiAffinity
	PreferredAffinity
	PreferredAntiAffinity
)

// PlacedTerm is a pod (anti-)affinity term of a pod counted on a node.
type PlacedTerm struct {
	Pod  *PodInfo
	Node *NodeInfo
	Term *AffinityTerm
	Kind TermKind
	// Weight is a preferred term's weight (0 for required terms).
	Weight int32

	// keys are where the term is filed; unindexed when it could not be;
	// exact when being filed under the key a pod's labels give is matching
	// it (the selector has that one requirement only).
	keys             []labelKey
	unindexed, exact bool
}

type termSet map[*PlacedTerm]struct{}

// termIndex files the terms of placed pods by what their selectors
// require, so that the terms selecting a given pod are found from its
// labels.
type termIndex struct {
	byLabel   map[labelKey]termSet
	unindexed termSet
	byPod     map[*PodInfo][]*PlacedTerm
}

func newTermIndex() termIndex {
	return termIndex{byLabel: map[labelKey]termSet{}, unindexed: termSet{}, byPod: map[*PodInfo][]*PlacedTerm{}}
}

// fileKeys are where pt is filed: under one equality requirement of its
// selector, for each namespace it selects and each value; none (and
// indexed true) for a selector that selects nothing.
func (pt *PlacedTerm) fileKeys() (keys []labelKey, indexed bool) {
	reqs, ok := equalityRequirements(pt.Term.Selector)
	if !ok {
		return nil, true
	}
	if len(reqs) == 0 {
		return nil, false
	}
	all, _ := pt.Term.Selector.Requirements()
	pt.exact = len(all) == 1
	// The requirement with the fewest values.
	r := reqs[0]
	for _, o := range reqs[1:] {
		if len(values(&o)) < len(values(&r)) {
			r = o
		}
	}
	for _, ns := range termNamespaces(pt.Term) {
		for _, v := range values(&r) {
			keys = append(keys, labelKey{ns, r.Key(), v})
		}
	}
	return keys, true
}

func (x *termIndex) add(pt *PlacedTerm) {
	x.byPod[pt.Pod] = append(x.byPod[pt.Pod], pt)
	keys, indexed := pt.fileKeys()
	pt.keys, pt.unindexed = keys, !indexed
	if !indexed {
		x.unindexed[pt] = struct{}{}
		return
	}
	for _, k := range keys {
		set := x.byLabel[k]
		if set == nil {
			set = termSet{}
			x.byLabel[k] = set
		}
		set[pt] = struct{}{}
	}
}

func (x *termIndex) remove(pi *PodInfo) {
	for _, pt := range x.byPod[pi] {
		if pt.unindexed {
			delete(x.unindexed, pt)
			continue
		}
		for _, k := range pt.keys {
			if set := x.byLabel[k]; set != nil {
				delete(set, pt)
				if len(set) == 0 {
					delete(x.byLabel, k)
				}
			}
		}
	}
	delete(x.byPod, pi)
}

// each calls fn for every filed term on an existing node that selects pod.
// A term is filed under one key per (namespace, value) of a single label
// key, and pod has one namespace and one value per key: fn sees each term
// at most once.
func (x *termIndex) each(pod *corev1.Pod, fn func(*PlacedTerm)) {
	visit := func(set termSet) {
		for pt := range set {
			if pt.Node.Node != nil && (pt.exact || pt.Term.Matches(pod)) {
				fn(pt)
			}
		}
	}
	if len(x.byLabel) > 0 {
		for k, v := range pod.Labels {
			visit(x.byLabel[labelKey{pod.Namespace, k, v}])
			visit(x.byLabel[labelKey{allNamespaces, k, v}])
		}
	}
	for pt := range x.unindexed {
		if pt.Node.Node != nil && pt.Term.Matches(pod) {
			fn(pt)
		}
	}
}

// EachAntiAffinityTerm calls fn for every required anti-affinity term of a
// counted pod, on an existing node, that selects pod.
func (s *Snapshot) EachAntiAffinityTerm(pod *corev1.Pod, fn func(*PlacedTerm)) {
	s.antiTerms.each(pod, fn)
}

// EachScoringTerm calls fn for every term of a counted pod, on an existing
// node, that selects pod and counts in inter-pod affinity scoring: required
// affinity, preferred affinity and preferred anti-affinity.
func (s *Snapshot) EachScoringTerm(pod *corev1.Pod, fn func(*PlacedTerm)) {
	s.scoreTerms.each(pod, fn)
}

// indexPod files pi (counted on ni) and its terms.
func (s *Snapshot) indexPod(pi *PodInfo, ni *NodeInfo) {
	s.pods.add(pi, ni)
	for i := range pi.RequiredAntiAffinity {
		s.antiTerms.add(&PlacedTerm{Pod: pi, Node: ni, Term: &pi.RequiredAntiAffinity[i], Kind: RequiredAntiAffinity})
	}
	for i := range pi.RequiredAffinity {
		s.scoreTerms.add(&PlacedTerm{Pod: pi, Node: ni, Term: &pi.RequiredAffinity[i], Kind: RequiredAffinity})
	}
	for i := range pi.PreferredAffinity {
		t := &pi.PreferredAffinity[i]
		s.scoreTerms.add(&PlacedTerm{Pod: pi, Node: ni, Term: &t.AffinityTerm, Kind: PreferredAffinity, Weight: t.Weight})
	}
	for i := range pi.PreferredAntiAffinity {
		t := &pi.PreferredAntiAffinity[i]
		s.scoreTerms.add(&PlacedTerm{Pod: pi, Node: ni, Term: &t.AffinityTerm, Kind: PreferredAntiAffinity, Weight: t.Weight})
	}
}

func (s *Snapshot) unindexPod(pi *PodInfo) {
	s.pods.remove(pi)
	if len(pi.RequiredAntiAffinity) > 0 {
		s.antiTerms.remove(pi)
	}
	if len(pi.RequiredAffinity)+len(pi.PreferredAffinity)+len(pi.PreferredAntiAffinity) > 0 {
		s.scoreTerms.remove(pi)
	}
}
