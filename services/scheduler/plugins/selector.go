package plugins

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// nodeSelectorTerm is a compiled NodeSelectorTerm: its label requirements
// and its metadata.name field requirements.
type nodeSelectorTerm struct {
	labels labels.Selector
	names  []nameReq
	empty  bool
}

type nameReq struct {
	in     bool
	values map[string]struct{}
}

// requiredNodeAffinity is what a pod demands of a node's labels: its
// nodeSelector and the terms of its required node affinity (ORed).
type requiredNodeAffinity struct {
	selector labels.Selector
	terms    []nodeSelectorTerm
}

func compileRequired(pod *corev1.Pod) (requiredNodeAffinity, error) {
	var r requiredNodeAffinity
	if len(pod.Spec.NodeSelector) > 0 {
		r.selector = labels.SelectorFromSet(pod.Spec.NodeSelector)
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return r, nil
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	r.terms = make([]nodeSelectorTerm, 0, len(terms))
	for i := range terms {
		t, err := compileTerm(&terms[i])
		if err != nil {
			return r, err
		}
		r.terms = append(r.terms, t)
	}
	if len(r.terms) == 0 {
		// A required affinity with no terms matches no node.
		r.terms = []nodeSelectorTerm{{empty: true}}
	}
	return r, nil
}

// matchesEveryNode reports whether the pod has neither nodeSelector nor
// required node affinity.
func (r *requiredNodeAffinity) matchesEveryNode() bool { return r.selector == nil && r.terms == nil }

// Match reports whether node satisfies the pod's nodeSelector and required
// node affinity.
func (r *requiredNodeAffinity) Match(node *corev1.Node) bool {
	if r.selector != nil && !r.selector.Matches(labels.Set(node.Labels)) {
		return false
	}
	if r.terms == nil {
		return true
	}
	for i := range r.terms {
		if r.terms[i].match(node) {
			return true
		}
	}
	return false
}

func (t *nodeSelectorTerm) match(node *corev1.Node) bool {
	if t.empty {
		return false
	}
	if t.labels != nil && !t.labels.Matches(labels.Set(node.Labels)) {
		return false
	}
	for _, n := range t.names {
		_, has := n.values[node.Name]
		if has != n.in {
			return false
		}
	}
	return true
}

var nodeSelectorOps = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

// compileTerm compiles a term. A term without requirements matches no node
// (Kubernetes' rule); matchFields supports metadata.name with In / NotIn.
func compileTerm(term *corev1.NodeSelectorTerm) (nodeSelectorTerm, error) {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return nodeSelectorTerm{empty: true}, nil
	}
	var t nodeSelectorTerm
	if len(term.MatchExpressions) > 0 {
		sel := labels.NewSelector()
		for _, e := range term.MatchExpressions {
			op, ok := nodeSelectorOps[e.Operator]
			if !ok {
				return t, fmt.Errorf("plugins: node selector operator %q", e.Operator)
			}
			if op == selection.GreaterThan || op == selection.LessThan {
				if len(e.Values) != 1 {
					return t, fmt.Errorf("plugins: node selector %s %s needs one value", e.Key, e.Operator)
				}
				if _, err := strconv.ParseInt(e.Values[0], 10, 64); err != nil {
					return t, fmt.Errorf("plugins: node selector %s %s: %w", e.Key, e.Operator, err)
				}
			}
			req, err := labels.NewRequirement(e.Key, op, e.Values)
			if err != nil {
				return t, fmt.Errorf("plugins: node selector: %w", err)
			}
			sel = sel.Add(*req)
		}
		t.labels = sel
	}
	for _, f := range term.MatchFields {
		if f.Key != "metadata.name" || (f.Operator != corev1.NodeSelectorOpIn && f.Operator != corev1.NodeSelectorOpNotIn) {
			return t, fmt.Errorf("plugins: node selector field %s %s not supported", f.Key, f.Operator)
		}
		n := nameReq{in: f.Operator == corev1.NodeSelectorOpIn, values: map[string]struct{}{}}
		for _, v := range f.Values {
			n.values[v] = struct{}{}
		}
		t.names = append(t.names, n)
	}
	return t, nil
}

// tolerates reports whether any toleration tolerates the taint (the
// matching rules of corev1.Toleration.ToleratesTaint without the numeric
// comparison operators).
func tolerates(tols []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tols {
		t := &tols[i]
		if t.Effect != "" && t.Effect != taint.Effect {
			continue
		}
		if t.Key != taint.Key && !(t.Key == "" && t.Operator == corev1.TolerationOpExists) {
			continue
		}
		switch t.Operator {
		case corev1.TolerationOpExists:
			return true
		case "", corev1.TolerationOpEqual:
			if t.Value == taint.Value {
				return true
			}
		}
	}
	return false
}
