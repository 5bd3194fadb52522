package volumebinding

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/services/controllers/persistentvolume/binding"
	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// Name is the plugin's name.
const Name = "VolumeBinding"

// Messages, as kube-scheduler's.
const (
	ErrReasonBindConflict = "node(s) didn't find available persistent volumes to bind"
	ErrReasonNodeConflict = "node(s) had volume node affinity conflict"
	ErrReasonPVNotExist   = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	MsgUnboundImmediate   = "pod has unbound immediate PersistentVolumeClaims"
)

// DefaultBindTimeout is how long PreBind waits for the claims to be bound
// (kube-scheduler's bindTimeoutSeconds, 600).
const DefaultBindTimeout = 10 * time.Minute

// Lister is what the plugin reads: the scheduler's caches.
type Lister interface {
	Claim(namespace, name string) (*corev1.PersistentVolumeClaim, bool)
	Volume(name string) (*corev1.PersistentVolume, bool)
	Volumes() []*corev1.PersistentVolume
	Class(name string) (*storagev1.StorageClass, bool)
	Node(name string) (*corev1.Node, bool)
	CSINode(name string) (*storagev1.CSINode, bool)
	// DriverHasTopology reports whether some CSINode registers driver
	// with topology keys: its volumes live on some nodes only.
	DriverHasTopology(driver string) bool
}

// Plugin is the VolumeBinding plugin.
type Plugin struct {
	lister      Lister
	client      kubernetes.Interface
	bindTimeout time.Duration
	poll        time.Duration
}

var (
	_ fw.PreFilterPlugin = (*Plugin)(nil)
	_ fw.FilterPlugin    = (*Plugin)(nil)
	_ fw.PreBindPlugin   = (*Plugin)(nil)
)

// New is the plugin over lister, writing with client; bindTimeout 0 is
// DefaultBindTimeout.
func New(lister Lister, client kubernetes.Interface, bindTimeout time.Duration) *Plugin {
	if bindTimeout <= 0 {
		bindTimeout = DefaultBindTimeout
	}
	return &Plugin{lister: lister, client: client, bindTimeout: bindTimeout, poll: 25 * time.Millisecond}
}

// Name is Name.
func (p *Plugin) Name() string { return Name }

// podClaims are a pod's claims, sorted into bound ones (with their
// volume name) and those waiting for a consumer.
type podClaims struct {
	bound []*corev1.PersistentVolumeClaim
	delay []*corev1.PersistentVolumeClaim
}

type stateData struct {
	claims podClaims
	// volumes are the PVs at PreFilter, by class, for the delayed claims.
	volumes map[string][]*corev1.PersistentVolume
}

func (s *stateData) Clone() fw.StateData { return s }

// claimNames are the claim names of pod's volumes (ephemeral volumes'
// claims are <pod>-<volume>), and whether each must be owned by the pod.
func claimNames(pod *corev1.Pod) (names []string, ephemeral []bool) {
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			names, ephemeral = append(names, v.PersistentVolumeClaim.ClaimName), append(ephemeral, false)
		case v.Ephemeral != nil:
			names, ephemeral = append(names, pod.Name+"-"+v.Name), append(ephemeral, true)
		}
	}
	return names, ephemeral
}

// classify reads pod's claims; a status when the pod cannot be scheduled
// anywhere.
func (p *Plugin) classify(pod *corev1.Pod) (podClaims, *fw.Status) {
	var pc podClaims
	names, ephemeral := claimNames(pod)
	for i, name := range names {
		pvc, ok := p.lister.Claim(pod.Namespace, name)
		if !ok {
			return pc, fw.NewStatus(fw.UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolumeclaim %q not found", name))
		}
		if pvc.DeletionTimestamp != nil {
			return pc, fw.NewStatus(fw.UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolumeclaim %q is being deleted", name))
		}
		if ephemeral[i] && !metav1.IsControlledBy(pvc, pod) {
			return pc, fw.NewStatus(fw.UnschedulableAndUnresolvable,
				fmt.Sprintf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pvc.Namespace, pvc.Name, pod.Namespace, pod.Name))
		}
		if pvc.Spec.VolumeName != "" {
			pc.bound = append(pc.bound, pvc)
			continue
		}
		sc, _ := p.lister.Class(binding.ClaimClass(pvc))
		if !binding.IsDelayBinding(sc) {
			return pc, fw.NewStatus(fw.UnschedulableAndUnresolvable, MsgUnboundImmediate)
		}
		pc.delay = append(pc.delay, pvc)
	}
	return pc, nil
}

// PreFilter classifies the pod's claims (see the package documentation).
func (p *Plugin) PreFilter(_ context.Context, state *fw.CycleState, pi *fw.PodInfo, _ *fw.Snapshot) *fw.Status {
	pc, st := p.classify(pi.Pod)
	if st != nil {
		return st
	}
	if len(pc.bound) == 0 && len(pc.delay) == 0 {
		return fw.NewStatus(fw.Skip)
	}
	sd := &stateData{claims: pc}
	if len(pc.delay) > 0 {
		sd.volumes = volumesByClass(p.lister.Volumes())
	}
	state.Write(Name, sd)
	return nil
}

func volumesByClass(vols []*corev1.PersistentVolume) map[string][]*corev1.PersistentVolume {
	out := map[string][]*corev1.PersistentVolume{}
	for _, v := range vols {
		c := binding.VolumeClass(v)
		out[c] = append(out[c], v)
	}
	return out
}

// Filter checks one node (see the package documentation).
func (p *Plugin) Filter(state *fw.CycleState, _ *fw.PodInfo, ni *fw.NodeInfo) *fw.Status {
	sd, _ := state.Read(Name).(*stateData)
	if sd == nil || ni.Node == nil {
		return nil
	}
	var reasons []string
	for _, pvc := range sd.claims.bound {
		pv, ok := p.lister.Volume(pvc.Spec.VolumeName)
		if !ok {
			reasons = append(reasons, ErrReasonPVNotExist)
			break
		}
		if binding.CheckNodeAffinity(pv, ni.Node) != nil {
			reasons = append(reasons, ErrReasonNodeConflict)
			break
		}
	}
	if len(sd.claims.delay) > 0 {
		if _, ok := p.decide(sd.claims.delay, sd.volumes, ni.Node); !ok {
			reasons = append(reasons, ErrReasonBindConflict)
		}
	}
	if len(reasons) > 0 {
		return fw.NewStatus(fw.UnschedulableAndUnresolvable, reasons...)
	}
	return nil
}

// decision is how a pod's delayed claims are satisfied on one node.
type decision struct {
	static    []staticBinding
	provision []*corev1.PersistentVolumeClaim
}

type staticBinding struct {
	pvc *corev1.PersistentVolumeClaim
	pv  *corev1.PersistentVolume
}

// decide is kube's FindPodVolumes for one node: the claims, smallest
// request first, take the smallest free static volume the node reaches;
// the rest must be provisionable there.
func (p *Plugin) decide(claims []*corev1.PersistentVolumeClaim, volumes map[string][]*corev1.PersistentVolume, node *corev1.Node) (decision, bool) {
	sorted := append([]*corev1.PersistentVolumeClaim(nil), claims...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i].Spec.Resources.Requests[corev1.ResourceStorage], sorted[j].Spec.Resources.Requests[corev1.ResourceStorage]
		return a.Cmp(b) < 0
	})
	var d decision
	chosen := map[string]bool{}
	for _, pvc := range sorted {
		pv, err := binding.FindMatchingVolume(pvc, volumes[binding.ClaimClass(pvc)], node, chosen, true)
		if err != nil {
			return d, false
		}
		if pv != nil {
			chosen[pv.Name] = true
			d.static = append(d.static, staticBinding{pvc, pv})
			continue
		}
		if !p.canProvision(pvc, node) {
			return d, false
		}
		d.provision = append(d.provision, pvc)
	}
	return d, true
}

// canProvision is kube's checkVolumeProvisions for one claim, plus the
// CSINode check that stands in for CSIStorageCapacity: a driver whose
// volumes have topology provisions only on nodes that registered it.
func (p *Plugin) canProvision(pvc *corev1.PersistentVolumeClaim, node *corev1.Node) bool {
	sc, ok := p.lister.Class(binding.ClaimClass(pvc))
	if !ok || sc.Provisioner == "" || sc.Provisioner == binding.NotSupportedProvisioner {
		return false
	}
	if !matchTopology(sc.AllowedTopologies, node.Labels) {
		return false
	}
	if p.lister.DriverHasTopology(sc.Provisioner) {
		cn, ok := p.lister.CSINode(node.Name)
		if !ok {
			return false
		}
		for _, d := range cn.Spec.Drivers {
			if d.Name == sc.Provisioner {
				return true
			}
		}
		return false
	}
	return true
}

// matchTopology is kube's MatchTopologySelectorTerms: no terms match
// every node; otherwise some term's expressions all hold.
func matchTopology(terms []corev1.TopologySelectorTerm, nodeLabels map[string]string) bool {
	if len(terms) == 0 {
		return true
	}
	for _, t := range terms {
		ok := true
		for _, e := range t.MatchLabelExpressions {
			v, has := nodeLabels[e.Key]
			if !has || !slices.Contains(e.Values, v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
