package plugins

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

type nodeOpt func(*corev1.Node)
type podOpt func(*corev1.Pod)

// mkNode builds a node with allocatable cpu, memory, 100Gi ephemeral
// storage and 110 pods, labelled with its hostname.
func mkNode(name, cpu, mem string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func nLabels(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func nTaint(key, value string, effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func nUnschedulable() nodeOpt { return func(n *corev1.Node) { n.Spec.Unschedulable = true } }

func nPods(max string) nodeOpt {
	return func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse(max) }
}

func nNoPods() nodeOpt {
	return func(n *corev1.Node) { delete(n.Status.Allocatable, corev1.ResourcePods) }
}

func nImage(name string, size int64) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{name}, SizeBytes: size})
	}
}

// mkPod builds a pod in namespace "default" with one container "app".
func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{}}}
	p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:1"}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func req(cpu, mem string) podOpt {
	return func(p *corev1.Pod) {
		rl := corev1.ResourceList{}
		if cpu != "" {
			rl[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			rl[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		p.Spec.Containers[0].Resources.Requests = rl
	}
}

func storage(s string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.Containers[0].Resources.Requests == nil {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
		}
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse(s)
	}
}

func initReq(cpu, mem string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init", Image: "init:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}})
	}
}

func overhead(cpu string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
}

func on(node string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

func pLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func image(img string) podOpt { return func(p *corev1.Pod) { p.Spec.Containers[0].Image = img } }

func hostPort(port int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}

func tolerate(key, value string, effect corev1.TaintEffect) podOpt {
	return func(p *corev1.Pod) {
		op := corev1.TolerationOpEqual
		if value == "" {
			op = corev1.TolerationOpExists
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
	}
}

func nodeSelector(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func affinity(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

func requireNode(key string, op corev1.NodeSelectorOperator, values ...string) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		a.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}}}}
	}
}

func preferNode(weight int32, key string, values ...string) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}})
	}
}

func podTerm(topologyKey string, kv ...string) corev1.PodAffinityTerm {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return corev1.PodAffinityTerm{TopologyKey: topologyKey, LabelSelector: &metav1.LabelSelector{MatchLabels: m}}
}

func podAffinity(t corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	}
}

func podAntiAffinity(t corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	}
}

func preferPod(weight int32, anti bool, t corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		w := corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: t}
		if anti {
			if a.PodAntiAffinity == nil {
				a.PodAntiAffinity = &corev1.PodAntiAffinity{}
			}
			a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, w)
			return
		}
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, w)
	}
}

func spread(maxSkew int32, key string, when corev1.UnsatisfiableConstraintAction, kv ...string) podOpt {
	return func(p *corev1.Pod) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: &metav1.LabelSelector{MatchLabels: m}})
	}
}

// placement is a scheduling case: nodes and existing pods in, the pod's
// placement (one of want) or its FitError message out.
type placement struct {
	name     string
	nodes    []*corev1.Node
	existing []*corev1.Pod
	pod      *corev1.Pod
	want     []string // acceptable nodes; empty when the pod must not fit
	wantMsg  string   // the FitError message when it must not fit
}

func runPlacements(t *testing.T, plugins []fw.Plugin, cases []placement) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := fw.NewSnapshot(tc.nodes, tc.existing)
			f := fw.New(plugins, DefaultWeights(), fw.Options{Parallelism: 2, PercentageOfNodesToScore: 100, Seed: 1})
			res, err := f.Schedule(context.Background(), fw.NewPodInfo(tc.pod, 0), snap)
			if len(tc.want) == 0 {
				var fe *fw.FitError
				if !errors.As(err, &fe) {
					t.Fatalf("Schedule = %q, %v; want a FitError", res.Node, err)
				}
				if fe.Error() != tc.wantMsg {
					t.Fatalf("message\n got %q\nwant %q", fe.Error(), tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("Schedule: %v", err)
			}
			if !slices.Contains(tc.want, res.Node) {
				t.Fatalf("placed on %q, want one of %v", res.Node, tc.want)
			}
		})
	}
}
