package preemption

import (
	"context"
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
	"github.com/cairn-dev/cairn/services/scheduler/plugins"
)

func node(name, cpu string, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Spec: corev1.NodeSpec{Taints: taints}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return n
}

type pspec struct {
	name, node, cpu string
	prio            int32
	app             string // label app=<app>
	antiApp         string // required anti-affinity to app=<antiApp> per host
	terminating     bool
	never           bool
	nominated       string
}

func (s pspec) pod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: "default", Labels: map[string]string{}}}
	p.Spec.NodeName = s.node
	p.Spec.Priority = &s.prio
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s.cpu)}}}}
	if s.app != "" {
		p.Labels["app"] = s.app
	}
	if s.antiApp != "" {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": s.antiApp}}}}}}
	}
	if s.terminating {
		now := metav1.NewTime(time.Unix(1, 0))
		p.DeletionTimestamp = &now
	}
	if s.never {
		never := corev1.PreemptNever
		p.Spec.PreemptionPolicy = &never
	}
	p.Status.NominatedNodeName = s.nominated
	return p
}

func TestPreempt(t *testing.T) {
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name        string
		nodes       []*corev1.Node
		existing    []pspec
		pod         pspec
		wantNode    string
		wantVictims []string
		wantMsg     string
	}{
		{name: "evicts the lowest priorities, reprieves the rest",
			nodes:    []*corev1.Node{node("n1", "4")},
			existing: []pspec{{name: "a", node: "n1", cpu: "1", prio: 1}, {name: "b", node: "n1", cpu: "1", prio: 2}, {name: "c", node: "n1", cpu: "2", prio: 3}},
			pod:      pspec{name: "p", cpu: "2", prio: 10}, wantNode: "n1", wantVictims: []string{"a", "b"}},
		{name: "one victim is enough",
			nodes:    []*corev1.Node{node("n1", "4")},
			existing: []pspec{{name: "a", node: "n1", cpu: "2", prio: 1}, {name: "b", node: "n1", cpu: "2", prio: 2}},
			pod:      pspec{name: "p", cpu: "2", prio: 10}, wantNode: "n1", wantVictims: []string{"a"}},
		{name: "lower highest victim priority wins",
			nodes:    []*corev1.Node{node("n1", "2"), node("n2", "2")},
			existing: []pspec{{name: "a", node: "n1", cpu: "2", prio: 5}, {name: "b", node: "n2", cpu: "2", prio: 1}},
			pod:      pspec{name: "p", cpu: "2", prio: 10}, wantNode: "n2", wantVictims: []string{"b"}},
		{name: "fewer victims at equal priority",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			existing: []pspec{{name: "a1", node: "n1", cpu: "1", prio: 1}, {name: "a2", node: "n1", cpu: "1", prio: 1},
				{name: "b", node: "n2", cpu: "2", prio: 1}},
			pod: pspec{name: "p", cpu: "2", prio: 10}, wantNode: "n2", wantVictims: []string{"b"}},
		{name: "equal priority is never a victim",
			nodes:    []*corev1.Node{node("n1", "2")},
			existing: []pspec{{name: "a", node: "n1", cpu: "2", prio: 10}},
			pod:      pspec{name: "p", cpu: "1", prio: 10},
			wantMsg:  "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."},
		{name: "taint: not helpful",
			nodes:    []*corev1.Node{node("n1", "2"), node("n2", "2", gpu)},
			existing: []pspec{{name: "a", node: "n1", cpu: "2", prio: 10}},
			pod:      pspec{name: "p", cpu: "1", prio: 10},
			wantMsg:  "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."},
		{name: "too big even when empty",
			nodes:    []*corev1.Node{node("n1", "2")},
			existing: []pspec{{name: "a", node: "n1", cpu: "1", prio: 1}},
			pod:      pspec{name: "p", cpu: "3", prio: 10},
			wantMsg:  "preemption: 0/1 nodes are available: 1 Insufficient cpu."},
		{name: "preemptionPolicy Never",
			nodes:    []*corev1.Node{node("n1", "2")},
			existing: []pspec{{name: "a", node: "n1", cpu: "2", prio: 1}},
			pod:      pspec{name: "p", cpu: "1", prio: 10, never: true},
			wantMsg:  "preemption: not eligible due to preemptionPolicy=Never."},
		{name: "waits for terminating victims on its nominated node",
			nodes:    []*corev1.Node{node("n1", "2")},
			existing: []pspec{{name: "a", node: "n1", cpu: "2", prio: 1, terminating: true}},
			pod:      pspec{name: "p", cpu: "1", prio: 10, nominated: "n1"},
			wantMsg:  "preemption: not eligible due to a terminating pod on the nominated node."},
		{name: "evicting resolves anti-affinity",
			nodes:    []*corev1.Node{node("n1", "4")},
			existing: []pspec{{name: "db", node: "n1", cpu: "1", prio: 1, app: "db"}, {name: "x", node: "n1", cpu: "1", prio: 1}},
			pod:      pspec{name: "p", cpu: "1", prio: 10, antiApp: "db"}, wantNode: "n1", wantVictims: []string{"db"}},
		{name: "existing anti-affinity of a low pod",
			nodes:    []*corev1.Node{node("n1", "4")},
			existing: []pspec{{name: "loner", node: "n1", cpu: "1", prio: 1, antiApp: "web"}},
			pod:      pspec{name: "p", cpu: "1", prio: 10, app: "web"}, wantNode: "n1", wantVictims: []string{"loner"}},
		{name: "existing anti-affinity of a higher pod blocks",
			nodes:    []*corev1.Node{node("n1", "4")},
			existing: []pspec{{name: "loner", node: "n1", cpu: "1", prio: 100, antiApp: "web"}},
			pod:      pspec{name: "p", cpu: "1", prio: 10, app: "web"},
			wantMsg:  "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pods []*corev1.Pod
			for _, s := range tc.existing {
				pods = append(pods, s.pod())
			}
			snap := fw.NewSnapshot(tc.nodes, nil)
			for _, p := range pods {
				snap.AddPod(fw.NewPodInfo(p, 0), p.Spec.NodeName)
			}
			f := plugins.NewDefaultFramework(fw.Options{Parallelism: 1, Seed: 1})
			pi := fw.NewPodInfo(tc.pod.pod(), 0)
			_, err := f.Schedule(context.Background(), pi, snap)
			var fe *fw.FitError
			if !errors.As(err, &fe) {
				t.Fatalf("Schedule: %v, want a FitError", err)
			}
			res := Preempt(context.Background(), f, pi, snap, fe.Diagnosis)
			if tc.wantNode == "" {
				if res.Candidate != nil || res.Message != tc.wantMsg {
					t.Fatalf("got %+v\nwant message %q", res, tc.wantMsg)
				}
				return
			}
			if res.Candidate == nil {
				t.Fatalf("no candidate: %s", res.Message)
			}
			var got []string
			for _, v := range res.Candidate.Victims {
				got = append(got, v.Pod.Name)
			}
			sort.Strings(got)
			if res.Candidate.Node != tc.wantNode || !slices.Equal(got, tc.wantVictims) {
				t.Fatalf("got %s %v, want %s %v", res.Candidate.Node, got, tc.wantNode, tc.wantVictims)
			}
			// The snapshot is untouched.
			if n := len(snap.NodeInfo(tc.wantNode).Pods); n != countOn(tc.existing, tc.wantNode) {
				t.Fatalf("snapshot changed: %d pods on %s", n, tc.wantNode)
			}
		})
	}
}

func countOn(ps []pspec, node string) int {
	n := 0
	for _, p := range ps {
		if p.node == node {
			n++
		}
	}
	return n
}

// TestNominatedRoomIsKept: once a preemptor is nominated to a node, a
// lower-priority pod does not take the room freed for it.
func TestNominatedRoomIsKept(t *testing.T) {
	snap := fw.NewSnapshot([]*corev1.Node{node("n1", "2")}, nil)
	high := fw.NewPodInfo(pspec{name: "high", cpu: "2", prio: 10}.pod(), 0)
	snap.SetNominated(high, "n1")
	f := plugins.NewDefaultFramework(fw.Options{Parallelism: 1})
	low := fw.NewPodInfo(pspec{name: "low", cpu: "1", prio: 1}.pod(), 0)
	if _, err := f.Schedule(context.Background(), low, snap); err == nil || err.Error() != "0/1 nodes are available: 1 Insufficient cpu." {
		t.Fatalf("low-priority pod: %v, want Insufficient cpu", err)
	}
	if res, err := f.Schedule(context.Background(), high, snap); err != nil || res.Node != "n1" {
		t.Fatalf("nominated pod itself: %v %v", res, err)
	}
	higher := fw.NewPodInfo(pspec{name: "higher", cpu: "1", prio: 20}.pod(), 0)
	if res, err := f.Schedule(context.Background(), higher, snap); err != nil || res.Node != "n1" {
		t.Fatalf("higher-priority pod ignores the nomination: %v %v", res, err)
	}
}
