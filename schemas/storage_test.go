package schemas

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newPV(name string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}},
		},
	}
}

func newPVC(name, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

func TestDefaultStorage(t *testing.T) {
	r := testRegistry()
	pv := newPV("a")
	mustLookupGV(t, r, "", "persistentvolumes").Default(pv)
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem ||
		pv.Status.Phase != corev1.VolumePending || *pv.Spec.HostPath.Type != corev1.HostPathUnset {
		t.Errorf("pv defaults: %+v", pv.Spec)
	}
	pvc := newPVC("c", "1Gi")
	mustLookupGV(t, r, "", "persistentvolumeclaims").Default(pvc)
	if *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem || pvc.Status.Phase != corev1.ClaimPending {
		t.Errorf("pvc defaults: %+v", pvc)
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Provisioner: "x.csi"}
	mustLookupGV(t, r, "storage.k8s.io", "storageclasses").Default(sc)
	if *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("sc defaults: %+v", sc)
	}
	d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "x.csi"}}
	mustLookupGV(t, r, "storage.k8s.io", "csidrivers").Default(d)
	if !*d.Spec.AttachRequired || *d.Spec.PodInfoOnMount || *d.Spec.FSGroupPolicy != storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy ||
		!slices.Equal(d.Spec.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}) {
		t.Errorf("csidriver defaults: %+v", d.Spec)
	}
	if errs := validateCSIDriver(d); len(errs) > 0 {
		t.Errorf("defaulted driver invalid: %v", errs)
	}
}

func mustLookupGV(t testing.TB, r *Registry, group, plural string) *Resource {
	t.Helper()
	res, ok := r.Lookup(group, "v1", plural)
	if !ok {
		t.Fatalf("no resource %s/%s", group, plural)
	}
	return res
}

func TestValidatePersistentVolume(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*corev1.PersistentVolume)
		want []string
	}{
		{"valid", func(*corev1.PersistentVolume) {}, nil},
		{"no access modes", func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = nil }, []string{"FieldValueRequired spec.accessModes"}},
		{"bad access mode", func(pv *corev1.PersistentVolume) {
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"Sometimes"}
		},
			[]string{"FieldValueNotSupported spec.accessModes"}},
		{"rwop with others", func(pv *corev1.PersistentVolume) {
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce}
		}, []string{"FieldValueForbidden spec.accessModes"}},
		{"no capacity", func(pv *corev1.PersistentVolume) { pv.Spec.Capacity = nil },
			[]string{"FieldValueNotSupported spec.capacity", "FieldValueRequired spec.capacity"}},
		{"zero capacity", func(pv *corev1.PersistentVolume) { pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("0") },
			[]string{"FieldValueInvalid spec.capacity[storage]"}},
		{"no source", func(pv *corev1.PersistentVolume) { pv.Spec.HostPath = nil }, []string{"FieldValueRequired spec"}},
		{"two sources", func(pv *corev1.PersistentVolume) {
			pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "x.csi", VolumeHandle: "v"}
		}, []string{"FieldValueForbidden spec.csi"}},
		{"csi without handle", func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath, pv.Spec.CSI = nil, &corev1.CSIPersistentVolumeSource{Driver: "x.csi"}
		}, []string{"FieldValueRequired spec.csi.volumeHandle"}},
		{"local without affinity", func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath, pv.Spec.Local = nil, &corev1.LocalVolumeSource{Path: "/mnt/disk"}
		}, []string{"FieldValueRequired spec.nodeAffinity"}},
		{"bad reclaim", func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = "Keep" },
			[]string{"FieldValueNotSupported spec.persistentVolumeReclaimPolicy"}},
		{"bad class", func(pv *corev1.PersistentVolume) { pv.Spec.StorageClassName = "Fast_Disk" }, []string{"FieldValueInvalid spec.storageClassName"}},
		{"bad affinity", func(pv *corev1.PersistentVolume) {
			pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{}}
		}, []string{"FieldValueRequired spec.nodeAffinity.required.nodeSelectorTerms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv := newPV("vol-1")
			tc.mut(pv)
			defaultPersistentVolume(pv)
			if got := errKeys(validatePersistentVolume(pv)); !slices.Equal(got, sorted(tc.want)) {
				t.Errorf("errors %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidatePersistentVolumeUpdate(t *testing.T) {
	old := newPV("vol-1")
	defaultPersistentVolume(old)
	pv := old.DeepCopy()
	pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("2Gi")
	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "c"}
	if errs := validatePersistentVolumeUpdate(pv, old); len(errs) > 0 {
		t.Errorf("capacity and claimRef change refused: %v", errs)
	}
	pv.Spec.HostPath.Path = "/elsewhere"
	if got := errKeys(validatePersistentVolumeUpdate(pv, old)); !slices.Equal(got, []string{"FieldValueForbidden spec.persistentvolumesource"}) {
		t.Errorf("source change: %v", got)
	}
}

func TestValidatePersistentVolumeClaim(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*corev1.PersistentVolumeClaim)
		want []string
	}{
		{"valid", func(*corev1.PersistentVolumeClaim) {}, nil},
		{"no modes", func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = nil }, []string{"FieldValueRequired spec.accessModes"}},
		{"bad mode", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadWriteAll"}
		},
			[]string{"FieldValueNotSupported spec.accessModes"}},
		{"no request", func(c *corev1.PersistentVolumeClaim) { c.Spec.Resources.Requests = nil }, []string{"FieldValueRequired spec.resources[storage]"}},
		{"zero request", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0")
		},
			[]string{"FieldValueInvalid spec.resources[storage]"}},
		{"bad volume mode", func(c *corev1.PersistentVolumeClaim) { m := corev1.PersistentVolumeMode("Raw"); c.Spec.VolumeMode = &m },
			[]string{"FieldValueNotSupported spec.volumeMode"}},
		{"data source of core kind", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "Secret", Name: "s"}
		}, []string{"FieldValueInvalid spec.dataSource"}},
		{"bad name", func(c *corev1.PersistentVolumeClaim) { c.Name = "Data_1" }, []string{"FieldValueInvalid metadata.name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newPVC("data", "1Gi")
			tc.mut(c)
			if got := errKeys(validatePersistentVolumeClaim(c)); !slices.Equal(got, sorted(tc.want)) {
				t.Errorf("errors %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidatePersistentVolumeClaimUpdate(t *testing.T) {
	bound := func(size, capacity string) *corev1.PersistentVolumeClaim {
		c := newPVC("data", size)
		c.Spec.VolumeName = "pv-1"
		c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}}
		return c
	}
	for _, tc := range []struct {
		name     string
		old, pvc *corev1.PersistentVolumeClaim
		want     []string
	}{
		{"grow bound", bound("1Gi", "1Gi"), bound("2Gi", "1Gi"), nil},
		{"shrink bound", bound("2Gi", "2Gi"), bound("1Gi", "2Gi"), []string{"FieldValueForbidden spec.resources.requests.storage"}},
		{"shrink after failed expansion", bound("4Gi", "1Gi"), bound("2Gi", "1Gi"), nil},
		{"grow pending", newPVC("data", "1Gi"), newPVC("data", "2Gi"), []string{"FieldValueForbidden spec"}},
		{"set volume name once", newPVC("data", "1Gi"), func() *corev1.PersistentVolumeClaim {
			c := newPVC("data", "1Gi")
			c.Spec.VolumeName = "pv-1"
			return c
		}(), nil},
		{"change access modes", bound("1Gi", "1Gi"), func() *corev1.PersistentVolumeClaim {
			c := bound("1Gi", "1Gi")
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			return c
		}(), []string{"FieldValueForbidden spec"}},
		{"set class on a claim without", newPVC("data", "1Gi"), func() *corev1.PersistentVolumeClaim {
			c := newPVC("data", "1Gi")
			c.Spec.StorageClassName = ptrTo("standard")
			return c
		}(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errKeys(validatePersistentVolumeClaimUpdate(tc.pvc, tc.old)); !slices.Equal(got, sorted(tc.want)) {
				t.Errorf("errors %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidateStorageKinds(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "hostpath.csi.cairn.dev", VolumeBindingMode: &wffc}
	defaultStorageClass(sc)
	if errs := validateStorageClass(sc); len(errs) > 0 {
		t.Errorf("valid class: %v", errs)
	}
	bad := sc.DeepCopy()
	bad.Provisioner, bad.ReclaimPolicy = "", ptrTo(corev1.PersistentVolumeReclaimRecycle)
	if got := errKeys(validateStorageClass(bad)); !slices.Equal(got, []string{"FieldValueNotSupported reclaimPolicy", "FieldValueRequired provisioner"}) {
		t.Errorf("bad class: %v", got)
	}
	upd := sc.DeepCopy()
	upd.Parameters = map[string]string{"a": "b"}
	upd.AllowVolumeExpansion = ptrTo(true)
	if got := errKeys(validateStorageClassUpdate(upd, sc)); !slices.Equal(got, []string{"FieldValueForbidden parameters"}) {
		t.Errorf("class update: %v", got)
	}

	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-123"},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "hostpath.csi.cairn.dev", NodeName: "node-1",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptrTo("pv-1")}}}
	if errs := validateVolumeAttachment(va); len(errs) > 0 {
		t.Errorf("valid attachment: %v", errs)
	}
	moved := va.DeepCopy()
	moved.Spec.NodeName = "node-2"
	if got := errKeys(validateVolumeAttachmentUpdate(moved, va)); !slices.Equal(got, []string{"FieldValueInvalid spec"}) {
		t.Errorf("attachment update: %v", got)
	}
	va.Spec.Source.PersistentVolumeName = nil
	if got := errKeys(validateVolumeAttachment(va)); !slices.Equal(got, []string{"FieldValueRequired spec.source"}) {
		t.Errorf("attachment without source: %v", got)
	}

	n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
		{Name: "hostpath.csi.cairn.dev", NodeID: "node-1", TopologyKeys: []string{"topology.hostpath.csi.cairn.dev/node"}},
	}}}
	if errs := validateCSINode(n); len(errs) > 0 {
		t.Errorf("valid csinode: %v", errs)
	}
	n2 := n.DeepCopy()
	n2.Spec.Drivers[0].NodeID = "other"
	n2.Spec.Drivers = append(n2.Spec.Drivers, storagev1.CSINodeDriver{Name: "hostpath.csi.cairn.dev"})
	if got := errKeys(validateCSINodeUpdate(n2, n)); !slices.Equal(got, []string{"FieldValueDuplicate spec.drivers[1].name", "FieldValueInvalid spec.drivers", "FieldValueInvalid spec.drivers", "FieldValueRequired spec.drivers[1].nodeID"}) {
		t.Errorf("csinode update: %v", got)
	}
}

func TestStorageTables(t *testing.T) {
	r := testRegistry()
	created := metav1.NewTime(testNow.Add(-90 * 1e9))
	pv := newPV("pv-1")
	pv.CreationTimestamp = created
	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data"}
	pv.Spec.StorageClassName = "standard"
	pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce}
	defaultPersistentVolume(pv)
	pv.Status.Phase = corev1.VolumeBound
	pvc := newPVC("data", "1Gi")
	pvc.CreationTimestamp = created
	pvc.Spec.StorageClassName = ptrTo("standard")
	pending := pvc.DeepCopy()
	pending.Status.Phase = corev1.ClaimPending
	pvc.Spec.VolumeName = "pv-1"
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pv.Spec.AccessModes, Capacity: pv.Spec.Capacity}
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard", CreationTimestamp: created,
		Annotations: map[string]string{AnnotationDefaultStorageClass: "true"}}, Provisioner: "hostpath.csi.cairn.dev", VolumeBindingMode: &wffc}
	defaultStorageClass(sc)
	for _, tc := range []struct {
		plural, group string
		obj           Object
		cols          []string
		row           []any
	}{
		{"persistentvolumes", "", pv,
			[]string{"Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass", "VolumeAttributesClass", "Reason", "Age", "VolumeMode"},
			[]any{"pv-1", "1Gi", "RWO,RWX", "Retain", "Bound", "default/data", "standard", "<unset>", "", "90s", "Filesystem"}},
		{"persistentvolumeclaims", "", pvc,
			[]string{"Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeAttributesClass", "Age", "VolumeMode"},
			[]any{"data", "Bound", "pv-1", "1Gi", "RWO,RWX", "standard", "<unset>", "90s", "<unset>"}},
		{"persistentvolumeclaims", "", pending, nil, []any{"data", "Pending", "", "", "", "standard", "<unset>", "90s", "<unset>"}},
		{"storageclasses", "storage.k8s.io", sc,
			[]string{"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"},
			[]any{"standard (default)", "hostpath.csi.cairn.dev", "Delete", "WaitForFirstConsumer", false, "90s"}},
	} {
		t.Run(tc.plural, func(t *testing.T) {
			tab := mustLookupGV(t, r, tc.group, tc.plural).Table
			if tc.cols != nil {
				var names []string
				for _, c := range tab.Columns() {
					names = append(names, c.Name)
				}
				if !slices.Equal(names, tc.cols) {
					t.Errorf("columns %v", names)
				}
			}
			if got := tab.Row(tc.obj); !slices.Equal(got, tc.row) {
				t.Errorf("row %#v, want %#v", got, tc.row)
			}
		})
	}
}
