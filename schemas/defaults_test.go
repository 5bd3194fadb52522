package schemas

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestDefaultPod(t *testing.T) {
	r := testRegistry()
	res := mustLookup(t, r, "", "pods")
	pod := newPod("p")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}}
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
		{Name: "scratch"},
	}
	res.Default(pod)

	s := pod.Spec
	c := s.Containers[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"restartPolicy", s.RestartPolicy, corev1.RestartPolicyAlways},
		{"dnsPolicy", s.DNSPolicy, corev1.DNSClusterFirst},
		{"schedulerName", s.SchedulerName, "default-scheduler"},
		{"terminationGracePeriodSeconds", *s.TerminationGracePeriodSeconds, int64(30)},
		{"securityContext", s.SecurityContext != nil && equality.Semantic.DeepEqual(*s.SecurityContext, corev1.PodSecurityContext{}), true},
		{"enableServiceLinks", *s.EnableServiceLinks, true},
		{"terminationMessagePath", c.TerminationMessagePath, "/dev/termination-log"},
		{"terminationMessagePolicy", c.TerminationMessagePolicy, corev1.TerminationMessageReadFile},
		{"imagePullPolicy tagged", c.ImagePullPolicy, corev1.PullIfNotPresent},
		{"imagePullPolicy untagged", s.InitContainers[0].ImagePullPolicy, corev1.PullAlways},
		{"init terminationMessagePath", s.InitContainers[0].TerminationMessagePath, "/dev/termination-log"},
		{"port protocol", c.Ports[0].Protocol, corev1.ProtocolTCP},
		{"requests from limits", c.Resources.Requests.Cpu().String(), "500m"},
		{"probe timeout", c.LivenessProbe.TimeoutSeconds, int32(1)},
		{"probe period", c.LivenessProbe.PeriodSeconds, int32(10)},
		{"probe success", c.LivenessProbe.SuccessThreshold, int32(1)},
		{"probe failure", c.LivenessProbe.FailureThreshold, int32(3)},
		{"httpGet scheme", c.LivenessProbe.HTTPGet.Scheme, corev1.URISchemeHTTP},
		{"httpGet path", c.LivenessProbe.HTTPGet.Path, "/"},
		{"grpc service", *c.ReadinessProbe.GRPC.Service, ""},
		{"fieldRef apiVersion", c.Env[0].ValueFrom.FieldRef.APIVersion, "v1"},
		{"configMap defaultMode", *s.Volumes[0].ConfigMap.DefaultMode, int32(420)},
		{"secret defaultMode", *s.Volumes[1].Secret.DefaultMode, int32(420)},
		{"no source is emptyDir", *s.Volumes[2].EmptyDir, corev1.EmptyDirVolumeSource{}},
	}
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			if ck.got != ck.want {
				t.Errorf("got %#v, want %#v", ck.got, ck.want)
			}
		})
	}
	// Requests are not defaulted from limits for the priority class: no
	// priority defaulting here, that is admission's.
	if s.Priority != nil {
		t.Errorf("priority defaulted to %d", *s.Priority)
	}
}

func TestImageTag(t *testing.T) {
	tests := []struct{ image, want string }{
		{"nginx", "latest"},
		{"nginx:latest", "latest"},
		{"nginx:1.27", "1.27"},
		{"registry.example.com:5000/team/app", "latest"},
		{"registry.example.com:5000/team/app:v2", "v2"},
		{"nginx@sha256:" + "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2", ""},
		{"nginx:1.27@sha256:" + "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2", "1.27"},
		{"NGINX", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			if got := imageTag(tt.image); got != tt.want {
				t.Errorf("imageTag(%q) = %q, want %q", tt.image, got, tt.want)
			}
		})
	}
}

func TestDefaultDeploymentAndReplicaSet(t *testing.T) {
	r := testRegistry()
	d := newDeployment("web")
	mustLookup(t, r, "apps", "deployments").Default(d)
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
		d.Spec.Strategy.RollingUpdate.MaxSurge.String() != "25%" || d.Spec.Strategy.RollingUpdate.MaxUnavailable.String() != "25%" ||
		*d.Spec.RevisionHistoryLimit != 10 || *d.Spec.ProgressDeadlineSeconds != 600 {
		t.Errorf("deployment spec defaults: %+v", d.Spec)
	}
	tmpl := d.Spec.Template.Spec
	if tmpl.RestartPolicy != corev1.RestartPolicyAlways || tmpl.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("template defaults: %+v", tmpl)
	}
	// Pod-only defaults do not apply to templates.
	if tmpl.EnableServiceLinks != nil {
		t.Error("enableServiceLinks defaulted in a template")
	}

	recreate := newDeployment("web")
	recreate.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	mustLookup(t, r, "apps", "deployments").Default(recreate)
	if recreate.Spec.Strategy.RollingUpdate != nil {
		t.Error("rollingUpdate defaulted for Recreate")
	}

	rs := newReplicaSet("web")
	mustLookup(t, r, "apps", "replicasets").Default(rs)
	if *rs.Spec.Replicas != 1 || rs.Spec.Template.Spec.SchedulerName != "default-scheduler" {
		t.Errorf("replicaset defaults: %+v", rs.Spec)
	}
}

func TestDefaultOtherKinds(t *testing.T) {
	r := testRegistry()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	mustLookup(t, r, "", "namespaces").Default(ns)
	if ns.Status.Phase != corev1.NamespaceActive || ns.Labels["kubernetes.io/metadata.name"] != "team" {
		t.Errorf("namespace: %+v", ns)
	}

	s := &corev1.Secret{StringData: map[string]string{"k": "v"}, Data: map[string][]byte{"k": []byte("old"), "x": []byte("y")}}
	mustLookup(t, r, "", "secrets").Default(s)
	if s.Type != corev1.SecretTypeOpaque || string(s.Data["k"]) != "v" || string(s.Data["x"]) != "y" || s.StringData != nil {
		t.Errorf("secret: %+v", s)
	}

	n := &corev1.Node{Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	mustLookup(t, r, "", "nodes").Default(n)
	if n.Status.Allocatable.Cpu().String() != "4" {
		t.Errorf("node allocatable: %v", n.Status.Allocatable)
	}

	pdb := newPodDisruptionBudget("b")
	want := pdb.DeepCopy()
	mustLookup(t, r, "policy", "poddisruptionbudgets").Default(pdb)
	if !equality.Semantic.DeepEqual(pdb, want) {
		t.Errorf("poddisruptionbudget has no defaults, got %+v", pdb.Spec)
	}

	pc := &schedulingv1.PriorityClass{}
	mustLookup(t, r, "scheduling.k8s.io", "priorityclasses").Default(pc)
	if pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != corev1.PreemptLowerPriority {
		t.Errorf("priorityclass preemptionPolicy: %v", pc.PreemptionPolicy)
	}
}
