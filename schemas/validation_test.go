package schemas

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidatePodCreate(t *testing.T) {
	r := testRegistry()
	res := mustLookup(t, r, "", "pods")
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"valid", func(*corev1.Pod) {}, nil},
		{"name not a subdomain", func(p *corev1.Pod) { p.Name = "Bad_Name" }, []string{"FieldValueInvalid metadata.name"}},
		{"no name", func(p *corev1.Pod) { p.Name = "" }, []string{"FieldValueRequired metadata.name"}},
		{"bad generateName", func(p *corev1.Pod) { p.GenerateName = "Bad_" }, []string{"FieldValueInvalid metadata.generateName"}},
		{"no namespace", func(p *corev1.Pod) { p.Namespace = "" }, []string{"FieldValueRequired metadata.namespace"}},
		{"bad label", func(p *corev1.Pod) { p.Labels = map[string]string{"a b": "c"} }, []string{"FieldValueInvalid metadata.labels"}},
		{"no containers", func(p *corev1.Pod) { p.Spec.Containers = nil }, []string{"FieldValueRequired spec.containers"}},
		{"container name and image required", func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{{TerminationMessagePolicy: "File", ImagePullPolicy: "Always"}}
		}, []string{"FieldValueRequired spec.containers[0].image", "FieldValueRequired spec.containers[0].name"}},
		{"container name not a label", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "a.b" }, []string{"FieldValueInvalid spec.containers[0].name"}},
		{"duplicate container names", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0])
		}, []string{"FieldValueDuplicate spec.containers[1].name"}},
		{"init container name collides", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{p.Spec.Containers[0]}
		}, []string{"FieldValueDuplicate spec.initContainers[0].name"}},
		{"port out of range", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 70000, Protocol: "TCP"}}
		}, []string{"FieldValueInvalid spec.containers[0].ports[0].containerPort"}},
		{"port required and protocol", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Protocol: "ICMP"}}
		}, []string{"FieldValueNotSupported spec.containers[0].ports[0].protocol", "FieldValueRequired spec.containers[0].ports[0].containerPort"}},
		{"host port conflict", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b", Image: "x", TerminationMessagePolicy: "File", ImagePullPolicy: "Always"})
			for i := range p.Spec.Containers {
				p.Spec.Containers[i].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: "TCP"}}
			}
		}, []string{"FieldValueDuplicate spec.containers[1].ports[0].hostPort"}},
		{"restart policy", func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, []string{"FieldValueNotSupported spec.restartPolicy"}},
		{"dns policy", func(p *corev1.Pod) { p.Spec.DNSPolicy = "Google" }, []string{"FieldValueNotSupported spec.dnsPolicy"}},
		{"pull policy", func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" }, []string{"FieldValueNotSupported spec.containers[0].imagePullPolicy"}},
		{"request above limit", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			}
		}, []string{"FieldValueInvalid spec.containers[0].resources.requests"}},
		{"probe without handler", func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{SuccessThreshold: 1}
		}, []string{"FieldValueRequired spec.containers[0].livenessProbe"}},
		{"liveness success threshold", func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 2}
		}, []string{"FieldValueInvalid spec.containers[0].livenessProbe.successThreshold"}},
		{"mount of unknown volume", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}
		}, []string{"FieldValueNotFound spec.containers[0].volumeMounts[0].name"}},
		{"volume without source and bad name", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "Vol"}}
		}, []string{"FieldValueInvalid spec.volumes[0].name", "FieldValueRequired spec.volumes[0]"}},
		{"configmap volume without name", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}}
		}, []string{"FieldValueRequired spec.volumes[0].configMap.name"}},
		{"env name and valueFrom", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A=B"}, {Name: "X", Value: "v", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}
		}, []string{"FieldValueInvalid spec.containers[0].env[0].name", "FieldValueInvalid spec.containers[0].env[1].valueFrom"}},
		{"toleration without key needs Exists", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpEqual, Value: "x"}}
		}, []string{"FieldValueInvalid spec.tolerations[0].operator"}},
		{"ephemeral containers on create", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
		}, []string{"FieldValueForbidden spec.ephemeralContainers"}},
		{"active deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = new(int64) }, []string{"FieldValueInvalid spec.activeDeadlineSeconds"}},
		{"node name with gates", func(p *corev1.Pod) {
			p.Spec.NodeName = "n1"
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/gate"}}
		}, []string{"FieldValueForbidden spec.nodeName"}},
		{"init container probes", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "x", TerminationMessagePolicy: "File", ImagePullPolicy: "Always",
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}
		}, []string{"FieldValueForbidden spec.initContainers[0].readinessProbe"}},
		{"path-segment name checks run last", func(p *corev1.Pod) { p.Name = ".." }, []string{"FieldValueInvalid metadata.name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod("web-0")
			res.Default(pod)
			tt.mutate(pod)
			res.PrepareForCreate(pod)
			got := errKeys(res.ValidateCreate(pod))
			if !slices.Equal(got, sorted(tt.want)) {
				t.Errorf("got %v\nwant %v", got, sorted(tt.want))
			}
		})
	}
}

func TestValidatePodUpdate(t *testing.T) {
	r := testRegistry()
	res := mustLookup(t, r, "", "pods")
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"no change", func(*corev1.Pod) {}, nil},
		{"image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.28" }, nil},
		{"labels", func(p *corev1.Pod) { p.Labels["tier"] = "front" }, nil},
		{"add toleration", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: "Exists", Effect: "NoSchedule"})
		}, nil},
		{"remove toleration", func(p *corev1.Pod) { p.Spec.Tolerations = nil }, []string{"FieldValueForbidden spec.tolerations"}},
		{"set active deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo[int64](60) }, nil},
		{"restart policy", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }, []string{"FieldValueForbidden spec"}},
		{"add container", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b", Image: "x", TerminationMessagePolicy: "File", ImagePullPolicy: "Always"})
		}, []string{"FieldValueForbidden spec.containers"}},
		{"empty image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }, []string{"FieldValueRequired spec.containers[0].image"}},
		{"name", func(p *corev1.Pod) { p.Name = "other" }, []string{"FieldValueInvalid metadata.name"}},
		{"no resourceVersion", func(p *corev1.Pod) { p.ResourceVersion = "" }, []string{"FieldValueInvalid metadata.resourceVersion"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newPod("web-0")
			old.Spec.Tolerations = []corev1.Toleration{{Key: "a", Operator: "Exists", Effect: "NoExecute"}}
			created(res, old)
			pod := old.DeepCopy()
			tt.mutate(pod)
			res.Default(pod)
			res.PrepareForUpdate(pod, old)
			got := errKeys(res.ValidateUpdate(pod, old))
			if !slices.Equal(got, sorted(tt.want)) {
				t.Errorf("got %v\nwant %v", got, sorted(tt.want))
			}
		})
	}

	t.Run("forbidden message", func(t *testing.T) {
		old := created(res, newPod("web-0"))
		pod := old.DeepCopy()
		pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 81, Protocol: "TCP"}}
		errs := res.ValidateUpdate(pod, old)
		if len(errs) != 1 || !strings.HasPrefix(errs[0].Detail, podUpdateForbidden+"\n") || !strings.Contains(errs[0].Detail, "81") {
			t.Errorf("got %v", errs)
		}
	})
}

func TestValidateDeployment(t *testing.T) {
	r := testRegistry()
	res := mustLookup(t, r, "apps", "deployments")
	tests := []struct {
		name   string
		mutate func(*appsv1.Deployment)
		want   []string
	}{
		{"valid", func(*appsv1.Deployment) {}, nil},
		// A nil selector selects nothing, so kube reports the template too.
		{"no selector", func(d *appsv1.Deployment) { d.Spec.Selector = nil }, []string{"FieldValueRequired spec.selector", "FieldValueInvalid spec.template.metadata.labels"}},
		{"empty selector", func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} }, []string{"FieldValueInvalid spec.selector"}},
		{"selector does not match", func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "db"} }, []string{"FieldValueInvalid spec.template.metadata.labels"}},
		{"negative replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = ptrTo[int32](-1) }, []string{"FieldValueInvalid spec.replicas"}},
		{"both zero", func(d *appsv1.Deployment) {
			zero := intstr.FromInt32(0)
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &zero}
		}, []string{"FieldValueInvalid spec.strategy.rollingUpdate.maxUnavailable"}},
		{"maxUnavailable over 100%", func(d *appsv1.Deployment) {
			v := intstr.FromString("150%")
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: &v}
		}, []string{"FieldValueInvalid spec.strategy.rollingUpdate.maxUnavailable"}},
		{"bad percent", func(d *appsv1.Deployment) {
			v := intstr.FromString("lots")
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &v}
		}, []string{"FieldValueInvalid spec.strategy.rollingUpdate.maxSurge"}},
		{"strategy type", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" }, []string{"FieldValueNotSupported spec.strategy"}},
		{"recreate with rollingUpdate", func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{}}
		}, []string{"FieldValueForbidden spec.strategy.rollingUpdate"}},
		{"template restart policy", func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever }, []string{"FieldValueNotSupported spec.template.spec.restartPolicy"}},
		{"template container image", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" }, []string{"FieldValueRequired spec.template.spec.containers[0].image"}},
		{"progress deadline", func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 700
		}, []string{"FieldValueInvalid spec.progressDeadlineSeconds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDeployment("web")
			tt.mutate(d)
			res.Default(d)
			res.PrepareForCreate(d)
			got := errKeys(res.ValidateCreate(d))
			if !slices.Equal(got, sorted(tt.want)) {
				t.Errorf("got %v\nwant %v", got, sorted(tt.want))
			}
		})
	}

	t.Run("selector is immutable", func(t *testing.T) {
		old := created(res, newDeployment("web"))
		d := old.DeepCopy()
		d.Spec.Selector.MatchLabels["tier"] = "x"
		d.Spec.Template.Labels["tier"] = "x"
		res.PrepareForUpdate(d, old)
		got := errKeys(res.ValidateUpdate(d, old))
		if !slices.Equal(got, []string{"FieldValueInvalid spec.selector"}) {
			t.Errorf("got %v", got)
		}
	})
	t.Run("update validates like create", func(t *testing.T) {
		old := created(res, newDeployment("web"))
		d := old.DeepCopy()
		d.Spec.Replicas = ptrTo[int32](-3)
		res.PrepareForUpdate(d, old)
		if got := errKeys(res.ValidateUpdate(d, old)); !slices.Equal(got, []string{"FieldValueInvalid spec.replicas"}) {
			t.Errorf("got %v", got)
		}
	})
}

func TestValidateReplicaSet(t *testing.T) {
	res := mustLookup(t, testRegistry(), "apps", "replicasets")
	tests := []struct {
		name   string
		mutate func(*appsv1.ReplicaSet)
		want   []string
	}{
		{"valid", func(*appsv1.ReplicaSet) {}, nil},
		{"no selector", func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = nil }, []string{"FieldValueRequired spec.selector", "FieldValueInvalid spec.template.metadata.labels"}},
		{"negative replicas", func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptrTo[int32](-1) }, []string{"FieldValueInvalid spec.replicas"}},
		{"active deadline", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.ActiveDeadlineSeconds = ptrTo[int64](5) }, []string{"FieldValueInvalid spec.template.spec.activeDeadlineSeconds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newReplicaSet("web")
			tt.mutate(rs)
			res.Default(rs)
			got := errKeys(res.ValidateCreate(rs))
			if !slices.Equal(got, sorted(tt.want)) {
				t.Errorf("got %v\nwant %v", got, sorted(tt.want))
			}
		})
	}
}

func TestValidateOtherKinds(t *testing.T) {
	r := testRegistry()
	tests := []struct {
		name   string
		plural string
		group  string
		obj    Object
		want   []string
	}{
		{"namespace valid", "namespaces", "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, nil},
		{"namespace name is a label", "namespaces", "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team.a"}}, []string{"FieldValueInvalid metadata.name"}},
		{"namespace has no namespace", "namespaces", "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "b"}}, []string{"FieldValueForbidden metadata.namespace"}},
		{"namespace finalizer", "namespaces", "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"custom"}}}, []string{"FieldValueInvalid spec.finalizers"}},
		{"secret valid", "secrets", "", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Data: map[string][]byte{"a.b": nil}}, nil},
		{"secret bad key", "secrets", "", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Data: map[string][]byte{"a/b": nil}}, []string{"FieldValueInvalid data[a/b]"}},
		{"tls secret", "secrets", "", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Type: corev1.SecretTypeTLS}, []string{"FieldValueRequired data[tls.crt]", "FieldValueRequired data[tls.key]"}},
		{"configmap duplicate key", "configmaps", "", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}, Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"k": nil}}, []string{"FieldValueInvalid data[k]"}},
		{"node taints", "nodes", "", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: "Bad"}}}}, []string{"FieldValueNotSupported metadata.taints[0].effect"}},
		{"node pod cidr", "nodes", "", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.0.0.0/33"}}}, []string{"FieldValueInvalid spec.podCIDRs[0]"}},
		{"event namespace mismatch", "events", "", &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "a"}, InvolvedObject: corev1.ObjectReference{Namespace: "b"}}, []string{"FieldValueInvalid involvedObject.namespace"}},
		{"event valid", "events", "", &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "a"}, InvolvedObject: corev1.ObjectReference{Namespace: "a", Kind: "Pod", Name: "p"}}, nil},
		{"lease duration", "leases", "coordination.k8s.io", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "kube-node-lease"}, Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptrTo[int32](0)}}, []string{"FieldValueInvalid spec.leaseDurationSeconds"}},
		{"priorityclass too high", "priorityclasses", "scheduling.k8s.io", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 2000000000}, []string{"FieldValueForbidden value"}},
		{"priorityclass system prefix", "priorityclasses", "scheduling.k8s.io", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-mine"}, Value: 1}, []string{"FieldValueForbidden metadata.name"}},
		{"priorityclass system known", "priorityclasses", "scheduling.k8s.io", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 2000001000}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustLookup(t, r, tt.group, tt.plural)
			res.Default(tt.obj)
			res.PrepareForCreate(tt.obj)
			got := errKeys(res.ValidateCreate(tt.obj))
			if !slices.Equal(got, sorted(tt.want)) {
				t.Errorf("got %v\nwant %v", got, sorted(tt.want))
			}
		})
	}
}

func TestValidateUpdatesOfOtherKinds(t *testing.T) {
	r := testRegistry()
	immutable := true
	tests := []struct {
		name          string
		group, plural string
		old           Object
		mutate        func(Object)
		want          []string
	}{
		{"secret type", "", "secrets", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "d"}},
			func(o Object) {
				o.(*corev1.Secret).Type = corev1.SecretTypeBasicAuth
				o.(*corev1.Secret).Data = map[string][]byte{"username": nil}
			},
			[]string{"FieldValueInvalid type"}},
		{"immutable configmap", "", "configmaps", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "d"}, Immutable: &immutable},
			func(o Object) { o.(*corev1.ConfigMap).Data = map[string]string{"k": "v"} },
			[]string{"FieldValueForbidden data"}},
		{"priorityclass value", "scheduling.k8s.io", "priorityclasses", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Value: 5},
			func(o Object) { o.(*schedulingv1.PriorityClass).Value = 6 },
			[]string{"FieldValueForbidden value"}},
		{"node provider id", "", "nodes", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{ProviderID: "a"}},
			func(o Object) { o.(*corev1.Node).Spec.ProviderID = "b" },
			[]string{"FieldValueForbidden spec.providerID"}},
		{"node labels", "", "nodes", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
			func(o Object) { o.SetLabels(map[string]string{"node-role.kubernetes.io/control-plane": ""}) },
			nil},
		{"namespace label", "", "namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
			func(o Object) { o.SetLabels(map[string]string{"bad key!": ""}) },
			[]string{"FieldValueInvalid metadata.labels"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustLookup(t, r, tt.group, tt.plural)
			old := created(res, tt.old)
			obj := old.DeepCopyObject().(Object)
			tt.mutate(obj)
			res.Default(obj)
			res.PrepareForUpdate(obj, old)
			got := errKeys(res.ValidateUpdate(obj, old))
			if !slices.Equal(got, sorted(tt.want)) {
				t.Errorf("got %v\nwant %v", got, sorted(tt.want))
			}
		})
	}
}

func TestValidateBinding(t *testing.T) {
	tests := []struct {
		name string
		b    corev1.Binding
		want []string
	}{
		{"valid", corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, nil},
		{"no name", corev1.Binding{Target: corev1.ObjectReference{Kind: "Node"}}, []string{"FieldValueRequired target.name"}},
		{"wrong kind", corev1.Binding{Target: corev1.ObjectReference{Kind: "Pod", Name: "x"}}, []string{"FieldValueNotSupported target.kind"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errKeys(ValidateBinding(&tt.b)); !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("got %v", got)
			}
		})
	}
}

func TestErrorMessages(t *testing.T) {
	// A few messages clients and people match on, checked word for word.
	r := testRegistry()
	d := newDeployment("web")
	d.Spec.Template.Labels = map[string]string{"app": "db"}
	res := mustLookup(t, r, "apps", "deployments")
	res.Default(d)
	errs := res.ValidateCreate(d)
	if len(errs) != 1 || errs[0].Error() != `spec.template.metadata.labels: Invalid value: {"app":"db"}: `+"`selector` does not match template `labels`" {
		t.Errorf("got %v", errs)
	}

	p := newPod("p")
	p.Spec.Containers = nil
	pres := mustLookup(t, r, "", "pods")
	pres.Default(p)
	if errs := pres.ValidateCreate(p); len(errs) != 1 || errs[0].Error() != "spec.containers: Required value" {
		t.Errorf("got %v", errs)
	}
}

// errDetails renders errors as "<type> <field>: <detail>", to check kube's
// messages word for word.
func errDetails(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field+": "+e.Detail)
	}
	slices.Sort(out)
	return out
}

// wantDetails checks errs against want, in any order, with errDetails.
func wantDetails(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	if got := errDetails(errs); !slices.Equal(got, sorted(want)) {
		t.Errorf("got  %q\nwant %q", got, sorted(want))
	}
}

const (
	badPercentMsg    = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
	badLabelValueMsg = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

func TestValidatePodDisruptionBudget(t *testing.T) {
	res := mustLookup(t, testRegistry(), "policy", "poddisruptionbudgets")
	intOrStr := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	policy := func(p string) *policyv1.UnhealthyPodEvictionPolicyType {
		v := policyv1.UnhealthyPodEvictionPolicyType(p)
		return &v
	}
	tests := []struct {
		name   string
		mutate func(*policyv1.PodDisruptionBudget)
		want   []string
	}{
		{"min available", func(*policyv1.PodDisruptionBudget) {}, nil},
		{"max unavailable 100%", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, intOrStr(intstr.FromString("100%"))
		}, nil},
		{"neither set, no selector", func(p *policyv1.PodDisruptionBudget) { p.Spec = policyv1.PodDisruptionBudgetSpec{} }, nil},
		{"empty selector selects every pod", func(p *policyv1.PodDisruptionBudget) { p.Spec.Selector = &metav1.LabelSelector{} }, nil},
		{"zero and 0%", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable = intOrStr(intstr.FromInt32(0))
			p.Spec.MaxUnavailable = nil
		}, nil},
		{"eviction policies", func(p *policyv1.PodDisruptionBudget) { p.Spec.UnhealthyPodEvictionPolicy = policy("AlwaysAllow") }, nil},
		// kube validates a budget's name as a path segment only.
		{"name need not be a subdomain", func(p *policyv1.PodDisruptionBudget) { p.Name = "Web_PDB" }, nil},
		{"name not a path segment", func(p *policyv1.PodDisruptionBudget) { p.Name = "a/b" },
			[]string{`FieldValueInvalid metadata.name: may not contain '/'`}},
		{"no namespace", func(p *policyv1.PodDisruptionBudget) { p.Namespace = "" },
			[]string{"FieldValueRequired metadata.namespace: "}},
		{"both set", func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = intOrStr(intstr.FromInt32(1)) },
			[]string{"FieldValueInvalid spec: minAvailable and maxUnavailable cannot be both set"}},
		{"negative min available", func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = intOrStr(intstr.FromInt32(-1)) },
			[]string{"FieldValueInvalid spec.minAvailable: must be greater than or equal to 0"}},
		{"negative max unavailable", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, intOrStr(intstr.FromInt32(-3))
		}, []string{"FieldValueInvalid spec.maxUnavailable: must be greater than or equal to 0"}},
		{"not a percent", func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = intOrStr(intstr.FromString("half")) },
			[]string{"FieldValueInvalid spec.minAvailable: " + badPercentMsg}},
		{"negative percent is not a percent", func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = intOrStr(intstr.FromString("-5%")) },
			[]string{"FieldValueInvalid spec.minAvailable: " + badPercentMsg}},
		{"min available over 100%", func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = intOrStr(intstr.FromString("150%")) },
			[]string{"FieldValueInvalid spec.minAvailable: must not be greater than 100%"}},
		{"max unavailable over 100%", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, intOrStr(intstr.FromString("101%"))
		}, []string{"FieldValueInvalid spec.maxUnavailable: must not be greater than 100%"}},
		{"both set and both bad", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable, p.Spec.MaxUnavailable = intOrStr(intstr.FromInt32(-1)), intOrStr(intstr.FromString("200%"))
		}, []string{
			"FieldValueInvalid spec: minAvailable and maxUnavailable cannot be both set",
			"FieldValueInvalid spec.maxUnavailable: must not be greater than 100%",
			"FieldValueInvalid spec.minAvailable: must be greater than or equal to 0",
		}},
		{"selector label key", func(p *policyv1.PodDisruptionBudget) { p.Spec.Selector.MatchLabels = map[string]string{"a b": "web"} },
			[]string{"FieldValueInvalid spec.selector.matchLabels: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"}},
		{"selector operator", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near", Values: []string{"x"}}}
		}, []string{"FieldValueInvalid spec.selector.matchExpressions[0].operator: not a valid selector operator"}},
		{"selector values", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}
		}, []string{"FieldValueRequired spec.selector.matchExpressions[0].values: must be specified when `operator` is 'In' or 'NotIn'"}},
		{"selector label value", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"bad#value"}}}
		}, []string{"FieldValueInvalid spec.selector.matchExpressions[0].values[0]: " + badLabelValueMsg}},
		{"unhealthy pod eviction policy", func(p *policyv1.PodDisruptionBudget) { p.Spec.UnhealthyPodEvictionPolicy = policy("Never") },
			[]string{`FieldValueNotSupported spec.unhealthyPodEvictionPolicy: supported values: "AlwaysAllow", "IfHealthyBudget"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCreateErrors(t, res, newPodDisruptionBudget("web"), tt.mutate, tt.want)
		})
	}
}

func TestValidatePodDisruptionBudgetUpdate(t *testing.T) {
	res := mustLookup(t, testRegistry(), "policy", "poddisruptionbudgets")
	badValue := []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"bad#value"}}}
	tests := []struct {
		name   string
		old    func(*policyv1.PodDisruptionBudget)
		mutate func(*policyv1.PodDisruptionBudget)
		want   []string
	}{
		{"spec changes are allowed", nil, func(p *policyv1.PodDisruptionBudget) {
			half := intstr.FromString("50%")
			p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, &half
			p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
		}, nil},
		{"new spec is validated", nil, func(p *policyv1.PodDisruptionBudget) {
			two := intstr.FromInt32(2)
			p.Spec.MaxUnavailable = &two
		}, []string{"FieldValueInvalid spec: minAvailable and maxUnavailable cannot be both set"}},
		{"invalid selector values may stay", func(p *policyv1.PodDisruptionBudget) { p.Spec.Selector.MatchExpressions = badValue },
			func(p *policyv1.PodDisruptionBudget) { p.Labels = map[string]string{"x": "y"} }, nil},
		{"but not be added", nil, func(p *policyv1.PodDisruptionBudget) { p.Spec.Selector.MatchExpressions = badValue },
			[]string{"FieldValueInvalid spec.selector.matchExpressions[0].values[0]: " + badLabelValueMsg}},
		{"name is immutable", nil, func(p *policyv1.PodDisruptionBudget) { p.Name = "other" },
			[]string{"FieldValueInvalid metadata.name: field is immutable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newPodDisruptionBudget("web")
			if tt.old != nil {
				tt.old(old)
			}
			old = created(res, old)
			pdb := old.DeepCopy()
			tt.mutate(pdb)
			res.Default(pdb)
			res.PrepareForUpdate(pdb, old)
			wantDetails(t, res.ValidateUpdate(pdb, old), tt.want)
		})
	}
}

func TestValidatePodDisruptionBudgetStatus(t *testing.T) {
	res := mustLookup(t, testRegistry(), "policy", "poddisruptionbudgets")
	cond := func(typ, status, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, LastTransitionTime: metav1.NewTime(testNow)}
	}
	tests := []struct {
		name   string
		status policyv1.PodDisruptionBudgetStatus
		want   []string
	}{
		{"valid", policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3,
			DisruptedPods: map[string]metav1.Time{"web-0": metav1.NewTime(testNow)},
			Conditions:    []metav1.Condition{cond(policyv1.DisruptionAllowedCondition, "True", policyv1.SufficientPodsReason)},
		}, nil},
		{"negative counts", policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: -1, CurrentHealthy: -1, DesiredHealthy: -1, ExpectedPods: -1}, []string{
			"FieldValueInvalid status.currentHealthy: must be greater than or equal to 0",
			"FieldValueInvalid status.desiredHealthy: must be greater than or equal to 0",
			"FieldValueInvalid status.disruptionsAllowed: must be greater than or equal to 0",
			"FieldValueInvalid status.expectedPods: must be greater than or equal to 0",
		}},
		{"condition without status and reason", policyv1.PodDisruptionBudgetStatus{
			Conditions: []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, LastTransitionTime: metav1.NewTime(testNow)}},
		}, []string{
			"FieldValueRequired status.conditions[0].reason: ",
			"FieldValueRequired status.conditions[0].status: ",
		}},
		{"condition status and duplicate type", policyv1.PodDisruptionBudgetStatus{
			Conditions: []metav1.Condition{
				cond(policyv1.DisruptionAllowedCondition, "True", policyv1.SufficientPodsReason),
				cond(policyv1.DisruptionAllowedCondition, "Maybe", policyv1.SufficientPodsReason),
			},
		}, []string{
			"FieldValueDuplicate status.conditions[1]: ",
			`FieldValueNotSupported status.conditions[1].status: supported values: "False", "True", "Unknown"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := created(res, newPodDisruptionBudget("web"))
			pdb := old.DeepCopy()
			pdb.Status = tt.status
			res.Default(pdb)
			res.PrepareForStatusUpdate(pdb, old)
			wantDetails(t, res.ValidateStatus(pdb, old), tt.want)
		})
	}
}
