package clusterdns

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cairn-dev/cairn/ops/images"
)

// Names of the objects, as kubeadm's.
const (
	Namespace      = metav1.NamespaceSystem
	Name           = "coredns"
	ServiceName    = "kube-dns"
	RoleName       = "system:coredns"
	KubeconfigName = "coredns-kubeconfig"
	// User is the identity of CoreDNS's client certificate (Options.Kubeconfig).
	User = "system:coredns"
	// DefaultClusterIP is kube-dns's address in the default Service range
	// 10.96.0.0/12 (kubeadm's: the tenth address).
	DefaultClusterIP = "10.96.0.10"
	// KubeconfigDir is where the Secret KubeconfigName is mounted.
	KubeconfigDir = "/etc/coredns-kubeconfig"
)

// Labels of the Deployment's pods and the Service's selector.
var Labels = map[string]string{"k8s-app": "kube-dns"}

// Options shape the objects.
type Options struct {
	// ClusterIP of the Service kube-dns; default DefaultClusterIP.
	ClusterIP string
	// Domain is the cluster domain; default cluster.local.
	Domain string
	// Image; default images.CoreDNSRef.
	Image string
	// Replicas of the Deployment; default 2, as kubeadm.
	Replicas int32
	// Forward is the Corefile's upstream (CorefileOptions.Forward); empty
	// forwards nothing.
	Forward string
	// Kubeconfig, if set, is a kubeconfig for CoreDNS, stored in the
	// Secret coredns-kubeconfig and mounted at KubeconfigDir; the Corefile
	// names it. This is how CoreDNS gets credentials while cairn has no
	// ServiceAccount tokens; nil leaves CoreDNS to client-go's in-cluster
	// config (the pod's ServiceAccount coredns).
	Kubeconfig []byte
}

func (o Options) withDefaults() Options {
	if o.ClusterIP == "" {
		o.ClusterIP = DefaultClusterIP
	}
	if o.Domain == "" {
		o.Domain = "cluster.local"
	}
	if o.Image == "" {
		o.Image = images.CoreDNSRef
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	return o
}

// Set is every object of the cluster DNS.
type Set struct {
	ServiceAccount     *corev1.ServiceAccount
	ClusterRole        *rbacv1.ClusterRole
	ClusterRoleBinding *rbacv1.ClusterRoleBinding
	ConfigMap          *corev1.ConfigMap
	// Secret is nil without Options.Kubeconfig.
	Secret     *corev1.Secret
	Deployment *appsv1.Deployment
	Service    *corev1.Service
}

// Objects returns the cluster DNS objects as kubeadm's CoreDNS addon has
// them (cairn's differences: the Corefile forwards only with
// Options.Forward, and the kubeconfig Secret).
func Objects(o Options) Set {
	o = o.withDefaults()
	meta := func(name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: Namespace, Name: name, Labels: labels}
	}
	cf := CorefileOptions{Domain: o.Domain, Forward: o.Forward}
	s := Set{
		ServiceAccount: &corev1.ServiceAccount{ObjectMeta: meta(Name, nil)},
		ClusterRole: &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: RoleName},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
			},
		},
		ClusterRoleBinding: &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: RoleName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: RoleName},
			Subjects: []rbacv1.Subject{
				{Kind: rbacv1.ServiceAccountKind, Name: Name, Namespace: Namespace},
				{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: User},
			},
		},
		Service: &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ServiceName,
				Labels:      map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"},
				Annotations: map[string]string{"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}},
			Spec: corev1.ServiceSpec{
				Selector: maps.Clone(Labels), ClusterIP: o.ClusterIP,
				Ports: []corev1.ServicePort{
					{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
					{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
					{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
				},
			},
		},
	}
	if o.Kubeconfig != nil {
		cf.Kubeconfig = KubeconfigDir + "/kubeconfig"
		s.Secret = &corev1.Secret{ObjectMeta: meta(KubeconfigName, nil), Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"kubeconfig": o.Kubeconfig}}
	}
	s.ConfigMap = &corev1.ConfigMap{ObjectMeta: meta(Name, nil), Data: map[string]string{"Corefile": Corefile(cf)}}
	s.Deployment = deployment(o, s.Secret != nil)
	return s
}

func deployment(o Options, withKubeconfig bool) *appsv1.Deployment {
	one := intstr.FromInt32(1)
	probe := func(path string, port int32) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}}
	}
	c := corev1.Container{
		Name: Name, Image: o.Image, ImagePullPolicy: corev1.PullIfNotPresent,
		Args: []string{"-conf", "/etc/coredns/Corefile"},
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("70Mi")},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true}},
		Ports: []corev1.ContainerPort{
			{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
			{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
		},
		LivenessProbe: &corev1.Probe{ProbeHandler: probe("/health", 8080),
			InitialDelaySeconds: 60, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 5},
		ReadinessProbe: &corev1.Probe{ProbeHandler: probe("/ready", 8181)},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: new(false),
			Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
			ReadOnlyRootFilesystem:   new(true),
		},
	}
	vols := []corev1.Volume{{Name: "config-volume", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: Name},
		Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}}}}}}
	if withKubeconfig {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "kubeconfig", MountPath: KubeconfigDir, ReadOnly: true})
		vols = append(vols, corev1.Volume{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: KubeconfigName}}})
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name, Labels: maps.Clone(Labels)},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(o.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(Labels)},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &one}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(Labels)},
				Spec: corev1.PodSpec{
					PriorityClassName:  "system-cluster-critical",
					ServiceAccountName: Name,
					Tolerations: []corev1.Toleration{
						{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
						{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
					},
					NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
								LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
									{Key: "k8s-app", Operator: metav1.LabelSelectorOpIn, Values: []string{"kube-dns"}}}}}}},
					}},
					Containers: []corev1.Container{c},
					DNSPolicy:  corev1.DNSDefault,
					Volumes:    vols,
				},
			},
		},
	}
}

// Ensure makes the cluster DNS objects exist, as kubeadm's addon phase
// does at every `cairn up` start. It is idempotent. What it creates is as
// Objects returns; of what exists it keeps the ConfigMap (a user's edit of
// the Corefile stays), the Service and the ServiceAccount as they are, and
// brings back the ClusterRole, the ClusterRoleBinding, the Secret and the
// Deployment's pod template (a new cairn's image) to Objects' when they
// differ. A ServiceAccount the API does not serve yet is left out.
func Ensure(ctx context.Context, client kubernetes.Interface, o Options, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := Objects(o)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("clusterdns: namespace: %w", err)
	}
	if _, err := client.CoreV1().ServiceAccounts(Namespace).Create(ctx, s.ServiceAccount, metav1.CreateOptions{}); err != nil &&
		!apierrors.IsAlreadyExists(err) {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("clusterdns: serviceaccount: %w", err)
		}
		log.InfoContext(ctx, "clusterdns: the API serves no ServiceAccounts; CoreDNS uses its kubeconfig Secret")
	}
	rbac := client.RbacV1()
	if err := ensure(ctx, "clusterrole", s.ClusterRole, rbac.ClusterRoles().Get, rbac.ClusterRoles().Create, rbac.ClusterRoles().Update,
		func(cur, want *rbacv1.ClusterRole) bool {
			same := reflect.DeepEqual(cur.Rules, want.Rules)
			cur.Rules = want.Rules
			return same
		}); err != nil {
		return err
	}
	if err := ensure(ctx, "clusterrolebinding", s.ClusterRoleBinding, rbac.ClusterRoleBindings().Get, rbac.ClusterRoleBindings().Create,
		rbac.ClusterRoleBindings().Update, func(cur, want *rbacv1.ClusterRoleBinding) bool {
			same := reflect.DeepEqual(cur.Subjects, want.Subjects) && cur.RoleRef == want.RoleRef
			cur.Subjects = want.Subjects
			return same || cur.RoleRef != want.RoleRef // roleRef is immutable: leave a different one alone
		}); err != nil {
		return err
	}
	core := client.CoreV1()
	keep := func(_, _ *corev1.ConfigMap) bool { return true }
	if err := ensure(ctx, "configmap", s.ConfigMap, core.ConfigMaps(Namespace).Get, core.ConfigMaps(Namespace).Create, core.ConfigMaps(Namespace).Update, keep); err != nil {
		return err
	}
	if s.Secret != nil {
		if err := ensure(ctx, "secret", s.Secret, core.Secrets(Namespace).Get, core.Secrets(Namespace).Create, core.Secrets(Namespace).Update,
			func(cur, want *corev1.Secret) bool {
				same := reflect.DeepEqual(cur.Data, want.Data)
				cur.Data = want.Data
				return same
			}); err != nil {
			return err
		}
	}
	keepSvc := func(_, _ *corev1.Service) bool { return true }
	if err := ensure(ctx, "service", s.Service, core.Services(Namespace).Get, core.Services(Namespace).Create, core.Services(Namespace).Update, keepSvc); err != nil {
		return err
	}
	apps := client.AppsV1().Deployments(Namespace)
	return ensure(ctx, "deployment", s.Deployment, apps.Get, apps.Create, apps.Update, func(cur, want *appsv1.Deployment) bool {
		// The image, arguments and volumes are cairn's; replicas and the
		// rest a user may scale or tune.
		cc, wc := &cur.Spec.Template.Spec.Containers, want.Spec.Template.Spec.Containers
		if len(*cc) == 1 && (*cc)[0].Image == wc[0].Image && reflect.DeepEqual((*cc)[0].Args, wc[0].Args) &&
			reflect.DeepEqual((*cc)[0].VolumeMounts, wc[0].VolumeMounts) && reflect.DeepEqual(cur.Spec.Template.Spec.Volumes, want.Spec.Template.Spec.Volumes) {
			return true
		}
		cur.Spec.Template.Spec.Containers = wc
		cur.Spec.Template.Spec.Volumes = want.Spec.Template.Spec.Volumes
		return false
	})
}

// ensure creates want, or when it exists lets merge bring the current
// object to what it must be (merge reports whether it already was) and
// updates it.
func ensure[T any](ctx context.Context, what string, want T,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error),
	merge func(cur, want T) bool,
) error {
	name := any(want).(metav1.Object).GetName()
	cur, err := get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("clusterdns: create %s %s: %w", what, name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("clusterdns: get %s %s: %w", what, name, err)
	}
	if merge(cur, want) {
		return nil
	}
	if _, err := update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("clusterdns: update %s %s: %w", what, name, err)
	}
	return nil
}

// Kubeconfig is a kubeconfig for CoreDNS in a pod: server (the kubernetes
// Service's https://<cluster IP>:443), verified as serverName (a name of
// the apiserver's certificate, as kubernetes.default.svc) against caPEM,
// with the client certificate certPEM/keyPEM (user User).
func Kubeconfig(server, serverName string, caPEM, certPEM, keyPEM []byte) ([]byte, error) {
	c := clientcmdapi.NewConfig()
	c.Clusters["cairn"] = &clientcmdapi.Cluster{Server: server, TLSServerName: serverName, CertificateAuthorityData: caPEM}
	c.AuthInfos[User] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	c.Contexts["cairn"] = &clientcmdapi.Context{Cluster: "cairn", AuthInfo: User}
	c.CurrentContext = "cairn"
	b, err := clientcmd.Write(*c)
	if err != nil {
		return nil, fmt.Errorf("clusterdns: kubeconfig: %w", err)
	}
	return b, nil
}
