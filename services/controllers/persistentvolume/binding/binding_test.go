package binding

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	rwo  = corev1.ReadWriteOnce
	rox  = corev1.ReadOnlyMany
	rwx  = corev1.ReadWriteMany
	gold = "gold"
)

type pvOpt func(*corev1.PersistentVolume)

func pv(name, size string, modes []corev1.PersistentVolumeAccessMode, opts ...pvOpt) *corev1.PersistentVolume {
	v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{AccessModes: modes,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable}}
	for _, o := range opts {
		o(v)
	}
	return v
}

func class(c string) pvOpt { return func(v *corev1.PersistentVolume) { v.Spec.StorageClassName = c } }
func labelled(k, val string) pvOpt {
	return func(v *corev1.PersistentVolume) { v.Labels = map[string]string{k: val} }
}
func phase(p corev1.PersistentVolumePhase) pvOpt {
	return func(v *corev1.PersistentVolume) { v.Status.Phase = p }
}
func claimRef(ns, name string, uid types.UID) pvOpt {
	return func(v *corev1.PersistentVolume) {
		v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: name, UID: uid}
	}
}
func block(v *corev1.PersistentVolume)    { m := corev1.PersistentVolumeBlock; v.Spec.VolumeMode = &m }
func deleting(v *corev1.PersistentVolume) { now := metav1.Now(); v.DeletionTimestamp = &now }
func onNode(node string) pvOpt {
	return func(v *corev1.PersistentVolume) {
		v.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}
	}
}

type pvcOpt func(*corev1.PersistentVolumeClaim)

func pvc(size string, modes []corev1.PersistentVolumeAccessMode, opts ...pvcOpt) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim", UID: "uid-1"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	for _, o := range opts {
		o(c)
	}
	return c
}

func wantClass(c string) pvcOpt {
	return func(p *corev1.PersistentVolumeClaim) { p.Spec.StorageClassName = &c }
}
func selecting(k, v string) pvcOpt {
	return func(p *corev1.PersistentVolumeClaim) {
		p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
}
func wantBlock(p *corev1.PersistentVolumeClaim) {
	m := corev1.PersistentVolumeBlock
	p.Spec.VolumeMode = &m
}

func modes(m ...corev1.PersistentVolumeAccessMode) []corev1.PersistentVolumeAccessMode { return m }

func TestFindBestMatch(t *testing.T) {
	tests := []struct {
		name    string
		claim   *corev1.PersistentVolumeClaim
		volumes []*corev1.PersistentVolume
		delay   bool
		want    string // "" for no match
	}{
		{name: "smallest that fits", claim: pvc("5Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("a", "10Gi", modes(rwo)), pv("b", "5Gi", modes(rwo)), pv("c", "1Gi", modes(rwo)), pv("d", "8Gi", modes(rwo))},
			want:    "b"},
		{name: "larger than any", claim: pvc("20Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("a", "10Gi", modes(rwo))}},
		{name: "fewest access modes first, whatever the size", claim: pvc("1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("both", "1Gi", modes(rwo, rwx)), pv("rwo", "10Gi", modes(rwo))},
			want:    "rwo"},
		{name: "missing access mode", claim: pvc("1Gi", modes(rwx)),
			volumes: []*corev1.PersistentVolume{pv("a", "1Gi", modes(rwo, rox))}},
		{name: "superset of access modes", claim: pvc("1Gi", modes(rwo, rox)),
			volumes: []*corev1.PersistentVolume{pv("a", "1Gi", modes(rwo)), pv("b", "1Gi", modes(rox, rwo, rwx))},
			want:    "b"},
		{name: "class must match", claim: pvc("1Gi", modes(rwo), wantClass(gold)),
			volumes: []*corev1.PersistentVolume{pv("none", "1Gi", modes(rwo)), pv("gold", "2Gi", modes(rwo), class(gold))},
			want:    "gold"},
		{name: "no class takes only classless volumes", claim: pvc("1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("gold", "1Gi", modes(rwo), class(gold))}},
		{name: "beta class annotation wins", claim: pvc("1Gi", modes(rwo), wantClass("silver"), func(p *corev1.PersistentVolumeClaim) {
			p.Annotations = map[string]string{AnnBetaStorageClass: gold}
		}), volumes: []*corev1.PersistentVolume{pv("gold", "1Gi", modes(rwo), class(gold))}, want: "gold"},
		{name: "selector", claim: pvc("1Gi", modes(rwo), selecting("tier", "db")),
			volumes: []*corev1.PersistentVolume{pv("web", "1Gi", modes(rwo), labelled("tier", "web")), pv("db", "3Gi", modes(rwo), labelled("tier", "db"))},
			want:    "db"},
		{name: "volumeMode Block", claim: pvc("1Gi", modes(rwo), wantBlock),
			volumes: []*corev1.PersistentVolume{pv("fs", "1Gi", modes(rwo)), pv("blk", "1Gi", modes(rwo), block)},
			want:    "blk"},
		{name: "Filesystem claim skips Block", claim: pvc("1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("blk", "1Gi", modes(rwo), block)}},
		{name: "only Available volumes", claim: pvc("1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("rel", "1Gi", modes(rwo), phase(corev1.VolumeReleased)), pv("pend", "1Gi", modes(rwo), phase(corev1.VolumePending))}},
		{name: "volume being deleted", claim: pvc("1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("a", "1Gi", modes(rwo), deleting)}},
		{name: "bound to another claim", claim: pvc("1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("a", "1Gi", modes(rwo), claimRef("ns", "other", "uid-2"))}},
		{name: "pre-bound wins over a smaller free one, whatever class and phase", claim: pvc("1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("free", "1Gi", modes(rwo)), pv("mine", "10Gi", modes(rwo), class(gold), phase(corev1.VolumeReleased), claimRef("ns", "claim", ""))},
			want:    "mine"},
		{name: "pre-bound by name to a claim of another UID", claim: pvc("1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("old", "1Gi", modes(rwo), claimRef("ns", "claim", "uid-old"))}},
		{name: "pre-bound still must fit", claim: pvc("5Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("mine", "1Gi", modes(rwo), claimRef("ns", "claim", "uid-1"))}},
		{name: "delayed binding takes only pre-bound volumes", claim: pvc("1Gi", modes(rwo)), delay: true,
			volumes: []*corev1.PersistentVolume{pv("free", "1Gi", modes(rwo))}},
		{name: "delayed binding, pre-bound", claim: pvc("1Gi", modes(rwo)), delay: true,
			volumes: []*corev1.PersistentVolume{pv("free", "1Gi", modes(rwo)), pv("mine", "1Gi", modes(rwo), claimRef("ns", "claim", ""))},
			want:    "mine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindBestMatch(tt.claim, tt.volumes, tt.delay)
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tt.want {
				t.Fatalf("matched %q, want %q", name, tt.want)
			}
		})
	}
}

func TestFindMatchingVolumeOnNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}}}
	tests := []struct {
		name     string
		claim    *corev1.PersistentVolumeClaim
		volumes  []*corev1.PersistentVolume
		excluded map[string]bool
		want     string
	}{
		{name: "affinity admits the node", claim: pvc("1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("n2", "1Gi", modes(rwo), onNode("n2")), pv("n1", "5Gi", modes(rwo), onNode("n1"))}, want: "n1"},
		{name: "no affinity admits every node", claim: pvc("1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("any", "1Gi", modes(rwo))}, want: "any"},
		{name: "pre-bound elsewhere rules the node out", claim: pvc("1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("free", "1Gi", modes(rwo)), pv("mine", "1Gi", modes(rwo), onNode("n2"), claimRef("ns", "claim", ""))}},
		{name: "access modes checked on the node path", claim: pvc("1Gi", modes(rwx)),
			volumes: []*corev1.PersistentVolume{pv("rwo", "1Gi", modes(rwo))}},
		{name: "excluded volumes", claim: pvc("1Gi", modes(rwo)), excluded: map[string]bool{"a": true},
			volumes: []*corev1.PersistentVolume{pv("a", "1Gi", modes(rwo)), pv("b", "2Gi", modes(rwo))}, want: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindMatchingVolume(tt.claim, tt.volumes, node, tt.excluded, true)
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tt.want {
				t.Fatalf("matched %q, want %q", name, tt.want)
			}
		})
	}
}
