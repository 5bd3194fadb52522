package csiprovisioner

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Class parameters external-provisioner reads itself and does not pass
// to the driver (the "csi.storage.k8s.io/" prefix).
const (
	prefixedParam = "csi.storage.k8s.io/"
	paramFSType   = prefixedParam + "fstype"
)

// driverParameters are the class's parameters without external-
// provisioner's own.
func driverParameters(sc *storagev1.StorageClass) map[string]string {
	out := map[string]string{}
	for k, v := range sc.Parameters {
		if !strings.HasPrefix(k, prefixedParam) {
			out[k] = v
		}
	}
	return out
}

// accessMode maps a Kubernetes access mode to CSI's, as
// external-provisioner does (RWO is SINGLE_NODE_MULTI_WRITER for drivers
// that report that capability).
func accessMode(m corev1.PersistentVolumeAccessMode, singleNodeMultiWriter bool) (csi.VolumeCapability_AccessMode_Mode, error) {
	switch m {
	case corev1.ReadWriteOnce:
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, nil
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	case corev1.ReadWriteOncePod:
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, nil
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	case corev1.ReadOnlyMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, nil
	case corev1.ReadWriteMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, nil
	}
	return 0, fmt.Errorf("unknown access mode %v", m)
}

// VolumeCapabilities are the capabilities a claim asks of its volume: one
// per access mode, block or mount (with the class's fsType and mount
// options).
func VolumeCapabilities(modes []corev1.PersistentVolumeAccessMode, volumeMode *corev1.PersistentVolumeMode, fsType string,
	mountFlags []string, singleNodeMultiWriter bool) ([]*csi.VolumeCapability, error) {
	var out []*csi.VolumeCapability
	for _, m := range modes {
		mode, err := accessMode(m, singleNodeMultiWriter)
		if err != nil {
			return nil, err
		}
		vc := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
		if volumeMode != nil && *volumeMode == corev1.PersistentVolumeBlock {
			vc.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		} else {
			vc.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: mountFlags}}
		}
		out = append(out, vc)
	}
	return out, nil
}

// nodeSegment is a node's topology for a driver: the node's labels of the
// topology keys the driver registered in the node's CSINode.
func nodeSegment(driver string, csiNode *storagev1.CSINode, node *corev1.Node) (map[string]string, error) {
	var keys []string
	found := false
	for _, d := range csiNode.Spec.Drivers {
		if d.Name == driver {
			keys, found = d.TopologyKeys, true
		}
	}
	if !found {
		return nil, fmt.Errorf("driver %s is not registered on node %s (CSINode)", driver, csiNode.Name)
	}
	seg := map[string]string{}
	for _, k := range keys {
		v, ok := node.Labels[k]
		if !ok {
			return nil, fmt.Errorf("topology labels from selected node %v does not match topology keys from CSINode %v", node.Labels, keys)
		}
		seg[k] = v
	}
	return seg, nil
}

// allowedSegments expands a class's allowedTopologies into segments: every
// combination of the values of each term's expressions.
func allowedSegments(terms []corev1.TopologySelectorTerm) []map[string]string {
	var out []map[string]string
	for _, t := range terms {
		combos := []map[string]string{{}}
		for _, e := range t.MatchLabelExpressions {
			var next []map[string]string
			for _, c := range combos {
				for _, v := range e.Values {
					n := maps.Clone(c)
					n[e.Key] = v
					next = append(next, n)
				}
			}
			combos = next
		}
		out = append(out, combos...)
	}
	return out
}

// dedupe drops repeated segments and sorts them, so the request is the
// same from one retry to the next.
func dedupe(segs []map[string]string) []map[string]string {
	seen := map[string]bool{}
	var out []map[string]string
	for _, s := range segs {
		k := segmentKey(s)
		if len(s) == 0 || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return segmentKey(out[i]) < segmentKey(out[j]) })
	return out
}

func segmentKey(s map[string]string) string {
	keys := slices.Sorted(maps.Keys(s))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + s[k] + ",")
	}
	return b.String()
}

func topologies(segs []map[string]string) []*csi.Topology {
	out := make([]*csi.Topology, len(segs))
	for i, s := range segs {
		out[i] = &csi.Topology{Segments: s}
	}
	return out
}

// VolumeNodeAffinity is external-provisioner's GenerateVolumeNodeAffinity:
// one term per accessible topology, each requiring every segment.
func VolumeNodeAffinity(accessible []*csi.Topology) *corev1.VolumeNodeAffinity {
	if len(accessible) == 0 {
		return nil
	}
	var terms []corev1.NodeSelectorTerm
	for _, t := range accessible {
		if len(t.GetSegments()) == 0 {
			continue
		}
		var exprs []corev1.NodeSelectorRequirement
		for _, k := range slices.Sorted(maps.Keys(t.GetSegments())) {
			exprs = append(exprs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{t.Segments[k]}})
		}
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
	}
	if len(terms) == 0 {
		return nil
	}
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
}
