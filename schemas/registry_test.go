package schemas

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestRegistryLookup(t *testing.T) {
	r := testRegistry()
	tests := []struct {
		group, version, plural string
		wantKind               string
		namespaced             bool
		short, cats, subs      []string
	}{
		{"", "v1", "namespaces", "Namespace", false, []string{"ns"}, nil, []string{"status", "finalize"}},
		{"", "v1", "pods", "Pod", true, []string{"po"}, []string{"all"}, []string{"status", "binding", "eviction", "log", "exec", "attach", "portforward"}},
		{"", "v1", "nodes", "Node", false, []string{"no"}, nil, []string{"status"}},
		{"", "v1", "events", "Event", true, []string{"ev"}, nil, nil},
		{"", "v1", "configmaps", "ConfigMap", true, []string{"cm"}, nil, nil},
		{"", "v1", "secrets", "Secret", true, nil, nil, nil},
		{"", "v1", "serviceaccounts", "ServiceAccount", true, []string{"sa"}, nil, []string{"token"}},
		{"", "v1", "services", "Service", true, []string{"svc"}, []string{"all"}, []string{"status"}},
		{"", "v1", "endpoints", "Endpoints", true, []string{"ep"}, nil, nil},
		{"", "v1", "persistentvolumes", "PersistentVolume", false, []string{"pv"}, nil, []string{"status"}},
		{"", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, []string{"pvc"}, nil, []string{"status"}},
		{"storage.k8s.io", "v1", "storageclasses", "StorageClass", false, []string{"sc"}, nil, nil},
		{"storage.k8s.io", "v1", "csidrivers", "CSIDriver", false, nil, nil, nil},
		{"storage.k8s.io", "v1", "csinodes", "CSINode", false, nil, nil, nil},
		{"storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", false, nil, nil, []string{"status"}},
		{"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true, nil, nil, nil},
		{"apps", "v1", "deployments", "Deployment", true, []string{"deploy"}, []string{"all"}, []string{"status", "scale"}},
		{"apps", "v1", "replicasets", "ReplicaSet", true, []string{"rs"}, []string{"all"}, []string{"status", "scale"}},
		{"apps", "v1", "controllerrevisions", "ControllerRevision", true, nil, nil, nil},
		{"apps", "v1", "daemonsets", "DaemonSet", true, []string{"ds"}, []string{"all"}, []string{"status"}},
		{"apps", "v1", "statefulsets", "StatefulSet", true, []string{"sts"}, []string{"all"}, []string{"status", "scale"}},
		{"batch", "v1", "jobs", "Job", true, nil, []string{"all"}, []string{"status"}},
		{"batch", "v1", "cronjobs", "CronJob", true, []string{"cj"}, []string{"all"}, []string{"status"}},
		{"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, []string{"pdb"}, nil, []string{"status"}},
		{"coordination.k8s.io", "v1", "leases", "Lease", true, nil, nil, nil},
		{"scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", false, []string{"pc"}, nil, nil},
		{"flowcontrol.apiserver.k8s.io", "v1", "flowschemas", "FlowSchema", false, nil, nil, []string{"status"}},
		{"flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations", "PriorityLevelConfiguration", false, nil, nil, []string{"status"}},
		{"rbac.authorization.k8s.io", "v1", "roles", "Role", true, nil, nil, nil},
		{"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, nil, nil, nil},
		{"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, nil, nil, nil},
		{"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.plural, func(t *testing.T) {
			res, ok := r.Lookup(tt.group, tt.version, tt.plural)
			if !ok {
				t.Fatal("not found")
			}
			if res.Kind != tt.wantKind || res.Namespaced != tt.namespaced {
				t.Errorf("got %s namespaced=%v", res.Kind, res.Namespaced)
			}
			if !slices.Equal(res.ShortNames, tt.short) || !slices.Equal(res.Categories, tt.cats) || !slices.Equal(res.Subresources, tt.subs) {
				t.Errorf("names: %v %v %v", res.ShortNames, res.Categories, res.Subresources)
			}
			byKind, ok := r.ByKind(res.GVK())
			if !ok || byKind != res {
				t.Errorf("ByKind(%v) = %v, %v", res.GVK(), byKind, ok)
			}
			// New and NewList give the registered Go types.
			gvks, _, err := r.Scheme().ObjectKinds(res.New())
			if err != nil || gvks[0] != res.GVK() {
				t.Errorf("scheme kind of New() = %v, %v", gvks, err)
			}
			listKinds, _, err := r.Scheme().ObjectKinds(res.NewList())
			if err != nil || listKinds[0] != res.GroupVersion.WithKind(res.Kind+"List") {
				t.Errorf("scheme kind of NewList() = %v, %v", listKinds, err)
			}
			for _, f := range []any{res.Default, res.PrepareForCreate, res.PrepareForUpdate, res.ValidateCreate, res.ValidateUpdate, res.Fields, res.Table} {
				if f == nil {
					t.Error("nil strategy func")
				}
			}
			if res.HasSubresource("status") != (res.PrepareForStatusUpdate != nil) {
				t.Error("PrepareForStatusUpdate must be set exactly when status is served")
			}
		})
	}
	if _, ok := r.Lookup("", "v1", "replicationcontrollers"); ok {
		t.Error("replicationcontrollers are not served")
	}
	if _, ok := r.Lookup("apps", "v1beta1", "deployments"); ok {
		t.Error("apps/v1beta1 is not served")
	}
}

func TestRegistryOrder(t *testing.T) {
	r := testRegistry()
	wantGroups := []schema.GroupVersion{
		{Version: "v1"}, {Group: "apps", Version: "v1"}, {Group: "batch", Version: "v1"}, {Group: "certificates.k8s.io", Version: "v1"}, {Group: "policy", Version: "v1"},
		{Group: "rbac.authorization.k8s.io", Version: "v1"}, {Group: "storage.k8s.io", Version: "v1"}, {Group: "admissionregistration.k8s.io", Version: "v1"}, {Group: "apiextensions.k8s.io", Version: "v1"}, {Group: "scheduling.k8s.io", Version: "v1"}, {Group: "coordination.k8s.io", Version: "v1"},
		{Group: "discovery.k8s.io", Version: "v1"}, {Group: "flowcontrol.apiserver.k8s.io", Version: "v1"},
	}
	if got := r.Groups(); !slices.Equal(got, wantGroups) {
		t.Errorf("Groups() = %v", got)
	}
	var plurals []string
	for _, res := range r.All() {
		plurals = append(plurals, res.Plural)
	}
	want := []string{"configmaps", "endpoints", "events", "namespaces", "nodes", "persistentvolumeclaims", "persistentvolumes", "pods", "secrets", "serviceaccounts", "services", "controllerrevisions", "daemonsets", "deployments", "replicasets", "statefulsets", "cronjobs", "jobs", "certificatesigningrequests", "poddisruptionbudgets",
		"clusterrolebindings", "clusterroles", "rolebindings", "roles", "csidrivers", "csinodes", "storageclasses", "volumeattachments", "mutatingwebhookconfigurations", "validatingwebhookconfigurations", "validatingadmissionpolicies", "validatingadmissionpolicybindings", "customresourcedefinitions", "priorityclasses", "leases", "endpointslices", "flowschemas", "prioritylevelconfigurations"}
	if !slices.Equal(plurals, want) {
		t.Errorf("All() = %v", plurals)
	}
	// Registries share nothing.
	a, b := NewRegistry(), NewRegistry()
	ra, _ := a.Lookup("", "v1", "pods")
	rb, _ := b.Lookup("", "v1", "pods")
	if ra == rb {
		t.Error("two registries share a Resource")
	}
}

func TestCodecsRoundTrip(t *testing.T) {
	r := testRegistry()
	d := newDeployment("web")
	d.APIVersion, d.Kind = "apps/v1", "Deployment"
	data, err := runtime.Encode(r.Codecs().LegacyCodec(appsv1.SchemeGroupVersion), d)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := runtime.Decode(r.Codecs().UniversalDeserializer(), data)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*appsv1.Deployment); got.Name != "web" || got.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("decoded %+v", got)
	}
	if _, _, err := r.Scheme().ObjectKinds(&corev1.Binding{}); err != nil {
		t.Errorf("Binding is not in the scheme: %v", err)
	}
}

// TestCodecsPodDisruptionBudget round-trips a budget through every media
// type the registry's codecs serve; the IntOrString fields must keep their
// kind (1 and "50%").
func TestCodecsPodDisruptionBudget(t *testing.T) {
	r := testRegistry()
	pdb := newPodDisruptionBudget("web")
	half := intstr.FromString("50%")
	pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable = nil, &half
	pdb.Status.DisruptionsAllowed = 2
	for _, info := range r.Codecs().SupportedMediaTypes() {
		t.Run(info.MediaType, func(t *testing.T) {
			enc := r.Codecs().EncoderForVersion(info.Serializer, policyv1.SchemeGroupVersion)
			data, err := runtime.Encode(enc, pdb.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			obj, gvk, err := info.Serializer.Decode(data, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if *gvk != policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget") {
				t.Errorf("kind %v", gvk)
			}
			got := obj.(*policyv1.PodDisruptionBudget)
			if got.Spec.MaxUnavailable == nil || *got.Spec.MaxUnavailable != half || got.Spec.MinAvailable != nil ||
				got.Status.DisruptionsAllowed != 2 || got.Spec.Selector.MatchLabels["app"] != "web" {
				t.Errorf("decoded %+v", got)
			}
		})
	}
}
