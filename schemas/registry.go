package schemas

import (
	"slices"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Registry holds every served Resource: the built-in ones, fixed by
// NewRegistry, and the custom ones that SetCustom adds and removes at run
// time (registry_custom.go). It is safe for concurrent use.
type Registry struct {
	// mu guards the maps and slices below, which SetCustom replaces.
	mu     sync.RWMutex
	all    []*Resource
	byGVR  map[schema.GroupVersionResource]*Resource
	byGVK  map[schema.GroupVersionKind]*Resource
	groups []schema.GroupVersion
	custom customSet
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
	now    func() time.Time
}

// Option configures a Registry.
type Option func(*Registry)

// WithClock sets the clock Table uses to render ages (time.Now by default).
func WithClock(now func() time.Time) Option {
	return func(r *Registry) { r.now = now }
}

// Group versions, in the order discovery lists them: the legacy core group
// first, then the named groups by kube-aggregator priority (apps 17800,
// batch 17400, certificates.k8s.io 17300, policy 17100, rbac.authorization.k8s.io 17000, storage.k8s.io 16800, admissionregistration.k8s.io 16700,
// apiextensions.k8s.io 16700, scheduling.k8s.io 16600, coordination.k8s.io 16500, discovery.k8s.io
// 16200, flowcontrol.apiserver.k8s.io 16100).
var (
	gvCore       = schema.GroupVersion{Version: "v1"}
	gvApps       = schema.GroupVersion{Group: "apps", Version: "v1"}
	gvBatch      = schema.GroupVersion{Group: "batch", Version: "v1"}
	gvPolicy     = schema.GroupVersion{Group: "policy", Version: "v1"}
	gvScheduling = schema.GroupVersion{Group: "scheduling.k8s.io", Version: "v1"}
	// gvAPIExtensions serves CustomResourceDefinitions (apiextensions.go).
	gvAPIExtensions = schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1"}
	gvCoordination  = schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}
	gvDiscovery     = schema.GroupVersion{Group: "discovery.k8s.io", Version: "v1"}
)

// NewRegistry returns a Registry with all built-in resources.
func NewRegistry(opts ...Option) *Registry {
	r := &Registry{
		byGVR: map[schema.GroupVersionResource]*Resource{},
		byGVK: map[schema.GroupVersionKind]*Resource{},
		now:   time.Now,
	}
	for _, o := range opts {
		o(r)
	}
	r.scheme = newScheme()
	r.codecs = serializer.NewCodecFactory(r.scheme)
	r.groups = []schema.GroupVersion{gvCore, gvApps, gvBatch, gvCertificates, gvPolicy, gvRBAC, gvStorage, gvAdmissionRegistration, gvAPIExtensions, gvScheduling, gvCoordination, gvDiscovery, gvFlowControl}

	// Within a group, resources are in alphabetical order of their plural,
	// as discovery lists them.
	for _, res := range slices.Concat([]*Resource{
		configMapResource(r.clock),
		endpointsResource(r.clock),
		eventResource(r.clock),
		namespaceResource(r.clock),
		nodeResource(r.clock),
		persistentVolumeClaimResource(r.clock),
		persistentVolumeResource(r.clock),
		podResource(r.clock),
		secretResource(r.clock),
		serviceAccountResource(r.clock),
		serviceResource(r.clock),
		controllerRevisionResource(r.clock),
		daemonSetResource(r.clock),
		deploymentResource(r.clock),
		replicaSetResource(r.clock),
		statefulSetResource(r.clock),
		cronJobResource(r.clock),
		jobResource(r.clock),
		csrResource(r.clock),
		podDisruptionBudgetResource(r.clock),
	}, rbacResources(r.clock), storageResources(r.clock), admissionRegistrationResources(r.clock), admissionPolicyResources(r.clock), []*Resource{
		customResourceDefinitionResource(r.clock),
		priorityClassResource(r.clock),
		leaseResource(r.clock),
		endpointSliceResource(r.clock),
	}, flowControlResources(r.clock)) {
		r.all = append(r.all, res)
		r.byGVR[res.GVR()] = res
		r.byGVK[res.GVK()] = res
	}
	r.custom.builtin = len(r.all)
	r.custom.builtinGroups = len(r.groups)
	return r
}

// clock is what the tables call to render ages.
func (r *Registry) clock() time.Time { return r.now() }

// Lookup finds a resource by its URL coordinates. group is "" for the
// legacy core group.
func (r *Registry) Lookup(group, version, plural string) (*Resource, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	res, ok := r.byGVR[schema.GroupVersionResource{Group: group, Version: version, Resource: plural}]
	return res, ok
}

// ByKind finds a resource by group, version and kind.
func (r *Registry) ByKind(gvk schema.GroupVersionKind) (*Resource, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	res, ok := r.byGVK[gvk]
	return res, ok
}

// All returns every resource, grouped as Groups orders them and sorted by
// plural within a group. The slice is a copy; the Resources are shared and
// must not be modified.
func (r *Registry) All() []*Resource {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*Resource(nil), r.all...)
}

// Groups returns the served group versions in discovery order.
func (r *Registry) Groups() []schema.GroupVersion {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]schema.GroupVersion(nil), r.groups...)
}

// Scheme returns a scheme that knows every served type, the meta/v1 types
// (Status, List options, Table, WatchEvent) and their list types. It is the
// Registry's own scheme, not client-go's global one. It has no defaulting
// funcs: defaulting is Resource.Default.
func (r *Registry) Scheme() *runtime.Scheme { return r.scheme }

// Codecs returns the codec factory for Scheme (JSON, YAML and protobuf).
func (r *Registry) Codecs() serializer.CodecFactory { return r.codecs }

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(appsv1.AddToScheme(s))
	utilruntime.Must(batchv1.AddToScheme(s))
	utilruntime.Must(certificatesv1.AddToScheme(s))
	utilruntime.Must(policyv1.AddToScheme(s))
	utilruntime.Must(rbacv1.AddToScheme(s))
	utilruntime.Must(storagev1.AddToScheme(s))
	utilruntime.Must(admissionregistrationv1.AddToScheme(s))
	utilruntime.Must(schedulingv1.AddToScheme(s))
	utilruntime.Must(coordinationv1.AddToScheme(s))
	utilruntime.Must(discoveryv1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(flowcontrolv1.AddToScheme(s))
	// corev1 registered the unversioned meta types (Status, WatchEvent, list
	// options); meta.k8s.io/v1 adds Table and PartialObjectMetadata.
	utilruntime.Must(metav1.AddMetaToScheme(s))
	return s
}
