package codec_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/codec"
)

// fixtures are API objects with most kinds of fields: custom marshalers
// (times, quantities, int-or-string), byte slices, maps, pointers, nested
// slices, empty and zero values.
func fixtures() map[string]any {
	now := metav1.NewTime(time.Date(2026, 11, 30, 9, 41, 7, 0, time.UTC))
	micro := metav1.NewMicroTime(time.Date(2026, 11, 30, 9, 41, 7, 123456000, time.UTC))
	yes, grace, replicas, secs := true, int64(30), int32(3), int32(10)
	maxSurge, maxUnavailable := intstr.FromString("25%"), intstr.FromInt32(1)
	holder := "node-1"
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f-x2k4q", GenerateName: "web-7d9f-", Namespace: "default",
			UID: "8d7e2c1a-1111-2222-3333-444455556666", ResourceVersion: "12345", CreationTimestamp: now,
			Labels: map[string]string{"app": "web", "pod-template-hash": "7d9f"}, Annotations: map[string]string{"z": "<&>", "a": "é\u2028"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f", UID: "u2", Controller: &yes, BlockOwnerDeletion: &yes}},
			Finalizers:      []string{"example.com/f"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: "Apply", Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1", RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "3600"}, ImagePullPolicy: corev1.PullIfNotPresent,
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:   []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1.5")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}}, PeriodSeconds: 5},
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes:     []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: resource.NewQuantity(1<<20, resource.BinarySI)}}}},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, TolerationSeconds: &grace}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.88.0.5", StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 2,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}},
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 4},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: pod.Spec},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable}},
			ProgressDeadlineSeconds: &secs},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: 3, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, LastUpdateTime: now, Reason: "NewReplicaSetAvailable"}}},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"bin": {0, 1, 2, 0xff, '"'}, "empty": {}},
		StringData: map[string]string{"x": "y"}, Type: corev1.SecretTypeOpaque}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{PodCIDR: "10.88.1.0/24"},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")}}}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &micro, LeaseDurationSeconds: &secs}}
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "default"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"},
		Reason: "Scheduled", Message: "Successfully assigned \"default/web\" to node-1", FirstTimestamp: now, EventTime: micro, Count: 1}
	raw, _ := json.Marshal(pod)
	env := &events.Event{ID: "01JDX3E8ZK5T0M3Q4W0V6Y8B9C", Revision: 12345, Type: events.Modified, Version: "v1", Resource: "pods",
		Kind: "Pod", Namespace: "default", Name: "web", UID: "u1", NodeName: "node-1", Object: raw, Verb: "update",
		Actor: events.Actor{User: "system:kube-scheduler", Groups: []string{"system:authenticated"}}, CausationID: "c", Time: micro.Time}
	return map[string]any{"pod": pod, "deployment": dep, "secret": secret, "node": node, "lease": lease, "event": event,
		"envelope": env, "empty pod": &corev1.Pod{}, "list": &corev1.PodList{Items: []corev1.Pod{*pod, {}}}}
}

// TestUnmarshal: Unmarshal decodes what apimachinery's decoder decodes, to
// the same value.
func TestUnmarshal(t *testing.T) {
	for name, v := range fixtures() {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, name, data, reflect.TypeOf(v).Elem())
	}
}

// TestUnmarshalEdges covers input cairn does not write itself but that
// must still decode as apimachinery decodes it.
func TestUnmarshalEdges(t *testing.T) {
	pod := reflect.TypeOf(corev1.Pod{})
	for name, data := range map[string]string{
		"duplicate names":   `{"metadata":{"name":"a","name":"b"}}`,
		"case mismatch":     `{"Metadata":{"Name":"a"},"metadata":{"namespace":"n"}}`,
		"unknown members":   `{"metadata":{"name":"a","x":{"y":[1,2]}},"zzz":null}`,
		"nulls":             `{"metadata":null,"spec":{"containers":null,"nodeName":null}}`,
		"invalid utf-8":     "{\"metadata\":{\"name\":\"a\xff\xfeb\"}}",
		"escapes":           `{"metadata":{"name":"a\u00e9\n\"\\\/b","labels":{"k":"\ud83d\ude00"}}}`,
		"quantity number":   `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":2,"memory":"1Gi"}}}]}}`,
		"int-or-string":     `{"spec":{"containers":[{"name":"c","livenessProbe":{"httpGet":{"port":80}}}]}}`,
		"whitespace":        " \n{ \"metadata\" : { \"name\" : \"a\" } }\t",
		"empty object":      `{}`,
		"time with offset":  `{"metadata":{"creationTimestamp":"2026-11-30T10:41:07+01:00"}}`,
		"time null":         `{"metadata":{"creationTimestamp":null}}`,
		"float into int":    `{"spec":{"terminationGracePeriodSeconds":1.5}}`,
		"string into int":   `{"spec":{"terminationGracePeriodSeconds":"30"}}`,
		"number into str":   `{"metadata":{"name":5}}`,
		"truncated":         `{"metadata":{"name":"a"}`,
		"trailing garbage":  `{"metadata":{}} x`,
		"not an object":     `[1,2]`,
		"huge int":          `{"spec":{"terminationGracePeriodSeconds":99999999999999999999}}`,
		"bytes base64":      `{"data":{"a":"AAEC/w=="}}`,
		"secret bad base64": `{"data":{"a":"!!"}}`,
	} {
		typ := pod
		if name == "bytes base64" || name == "secret bad base64" {
			typ = reflect.TypeOf(corev1.Secret{})
		}
		compare(t, name, []byte(data), typ)
	}
}

// compare decodes data into a new typ with both decoders: both fail, or
// both succeed with equal values.
func compare(t *testing.T, name string, data []byte, typ reflect.Type) {
	t.Helper()
	want := reflect.New(typ).Interface()
	wantErr := sigsjson.UnmarshalCaseSensitivePreserveInts(data, want)
	got := reflect.New(typ).Interface()
	gotErr := codec.Unmarshal(data, got)
	switch {
	case (wantErr == nil) != (gotErr == nil):
		t.Errorf("%s: error %v, apimachinery's %v", name, gotErr, wantErr)
	case wantErr == nil && !reflect.DeepEqual(got, want):
		t.Errorf("%s: decoded\n %#v\nwant\n %#v", name, got, want)
	}
}

// FuzzUnmarshal compares the decoders on mutations of real objects.
func FuzzUnmarshal(f *testing.F) {
	for _, v := range fixtures() {
		data, _ := json.Marshal(v)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range []reflect.Type{reflect.TypeOf(corev1.Pod{}), reflect.TypeOf(appsv1.Deployment{}), reflect.TypeOf(events.Event{})} {
			compare(t, typ.Name(), data, typ)
		}
	})
}

// BenchmarkDecode compares the decoders on a pod and on its event envelope.
func BenchmarkDecode(b *testing.B) {
	f := fixtures()
	pod, env := f["pod"].(*corev1.Pod), f["envelope"].(*events.Event)
	podJSON, _ := json.Marshal(pod)
	envJSON, _ := json.Marshal(env)
	cases := []struct {
		name string
		fn   func() error
	}{
		{"unmarshal/apimachinery", func() error { return sigsjson.UnmarshalCaseSensitivePreserveInts(podJSON, &corev1.Pod{}) }},
		{"unmarshal/codec", func() error { return codec.Unmarshal(podJSON, &corev1.Pod{}) }},
		{"envelope/encoding-json", func() error { return json.Unmarshal(envJSON, &events.Event{}) }},
		{"envelope/codec", func() error { return codec.Unmarshal(envJSON, &events.Event{}) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
