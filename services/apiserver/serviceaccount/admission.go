package serviceaccount

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/pki/satoken"
)

// Names of kube's ServiceAccount admission plugin
// (plugin/pkg/admission/serviceaccount).
const (
	// TokenVolumeNamePrefix starts the name of the projected token volume
	// (kube-api-access-xxxxx).
	TokenVolumeNamePrefix = "kube-api-access"
	// TokenMountPath is where every container gets the volume.
	TokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	mirrorPodKey   = "kubernetes.io/config.mirror"
)

// Admission is kube's ServiceAccount admission plugin. On the creation of a
// pod (not a mirror pod) it sets spec.serviceAccountName to "default" if
// empty, refuses (403) a pod whose ServiceAccount does not exist, and,
// unless the pod or else the ServiceAccount sets automountServiceAccountToken
// false, adds the projected volume kube-api-access-xxxxx (a token of
// WarnOnlyBoundTokenExpirationSeconds, ca.crt from the kube-root-ca.crt
// ConfigMap, the namespace from the downward API) mounted read-only at
// TokenMountPath in every init and regular container that has nothing
// mounted there. It copies the ServiceAccount's imagePullSecrets to a pod
// that has none. A mirror pod may not name a ServiceAccount, Secrets or a
// token projection.
type Admission struct {
	Caches *Caches
	// Sleep waits between the lookups of a missing default
	// ServiceAccount (which the controller is about to create); nil
	// means time.Sleep.
	Sleep func(time.Duration)
}

var _ apiserver.AdmissionPlugin = (*Admission)(nil)

// Name implements apiserver.AdmissionPlugin.
func (*Admission) Name() string { return "ServiceAccount" }

// Admit implements apiserver.AdmissionPlugin.
func (p *Admission) Admit(ctx context.Context, a *apiserver.AdmissionRequest) error {
	if a.Resource.GroupVersion.Group != "" || a.Resource.Plural != "pods" || a.Subresource != "" || a.Operation != "CREATE" {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("expected *v1.Pod but got %T", a.Object))
	}
	if _, mirror := pod.Annotations[mirrorPodKey]; mirror {
		return validateMirrorPod(a, pod)
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = satoken.DefaultServiceAccountName
	}
	sa, err := p.serviceAccount(ctx, a.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return forbidden(a, pod, fmt.Errorf("error looking up service account %s/%s: %w", a.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if shouldAutomount(sa, pod) {
		mountToken(pod)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 && len(sa.ImagePullSecrets) > 0 {
		pod.Spec.ImagePullSecrets = append([]corev1.LocalObjectReference(nil), sa.ImagePullSecrets...)
	}
	return nil
}

// serviceAccount is kube's getServiceAccount: the cache, then etcd; the
// default ServiceAccount is looked for up to 10 times, 100-200 ms apart,
// as the controller creates it with the namespace.
func (p *Admission) serviceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	attempts := 1
	if name == satoken.DefaultServiceAccountName {
		attempts = 10
	}
	sleep := time.Sleep
	if p.Sleep != nil {
		sleep = p.Sleep
	}
	interval := time.Duration(100+mrand.IntN(100)) * time.Millisecond
	for i := 0; i < attempts; i++ {
		if i > 0 {
			sleep(interval)
		}
		sa, err := p.Caches.ServiceAccount(ctx, namespace, name)
		if err == nil {
			return sa, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccount"}, name)
}

// forbidden is kube's admission.NewForbidden: the name is the object's,
// else its generateName.
func forbidden(a *apiserver.AdmissionRequest, pod *corev1.Pod, err error) error {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	if name == "" {
		name = "Unknown"
	}
	return apierrors.NewForbidden(a.Resource.GroupResource(), name, err)
}

func validateMirrorPod(a *apiserver.AdmissionRequest, pod *corev1.Pod) error {
	if pod.Spec.ServiceAccountName != "" {
		return forbidden(a, pod, fmt.Errorf("a mirror pod may not reference service accounts"))
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			return forbidden(a, pod, fmt.Errorf("a mirror pod may not reference secrets"))
		}
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				return forbidden(a, pod, fmt.Errorf("a mirror pod may not reference secrets"))
			}
			if s.ServiceAccountToken != nil {
				return forbidden(a, pod, fmt.Errorf("a mirror pod may not use ServiceAccountToken volume projections"))
			}
		}
	}
	if len(pod.Spec.ImagePullSecrets) > 0 {
		return forbidden(a, pod, fmt.Errorf("a mirror pod may not reference secrets"))
	}
	return nil
}

// shouldAutomount: the pod's preference, else the ServiceAccount's, else yes.
func shouldAutomount(sa *corev1.ServiceAccount, pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// mountToken is kube's mountServiceAccountToken.
func mountToken(pod *corev1.Pod) {
	name := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, TokenVolumeNamePrefix+"-") {
			name = v.Name
			break
		}
	}
	hasVolume := name != ""
	if !hasVolume {
		name = TokenVolumeNamePrefix + "-" + rand.String(5)
	}
	mount := corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: TokenMountPath}
	needed := false
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if !mountsAt(cs[i].VolumeMounts, TokenMountPath) {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	if !hasVolume && needed {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}})
	}
}

func mountsAt(ms []corev1.VolumeMount, path string) bool {
	for _, m := range ms {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

// TokenVolumeSource is the projected volume the plugin adds.
func TokenVolumeSource() *corev1.ProjectedVolumeSource {
	return &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(corev1.ProjectedVolumeSourceDefaultMode),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(apiserver.WarnOnlyBoundTokenExpirationSeconds)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: satoken.RootCAConfigMap},
				Items: []corev1.KeyToPath{{Key: satoken.RootCAKey, Path: satoken.RootCAKey}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}
}
