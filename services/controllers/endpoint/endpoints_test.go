package endpoint

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func testPod(name, ip string, ready bool, ports ...corev1.ContainerPort) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

// TestDesiredSubsets: the subsets kube's endpoint controller builds
// (TestSyncEndpoints* of endpoints_controller_test.go), repacked.
func TestDesiredSubsets(t *testing.T) {
	http := func(port int32) corev1.ContainerPort {
		return corev1.ContainerPort{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}
	}
	svc := func(tweak func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "p", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
		if tweak != nil {
			tweak(s)
		}
		return s
	}
	terminating := testPod("t", "10.0.0.9", true)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	failed := testPod("f", "10.0.0.8", false)
	failed.Status.Phase = corev1.PodFailed
	tests := []struct {
		name string
		svc  *corev1.Service
		pods []*corev1.Pod
		want []string
	}{
		{"ready and not", svc(nil), []*corev1.Pod{testPod("a", "10.0.0.1", true), testPod("b", "10.0.0.2", false)},
			[]string{"ports=[p:8080] ready=[a] notReady=[b]"}},
		{"terminating and failed pods are left out", svc(nil), []*corev1.Pod{testPod("a", "10.0.0.1", true), terminating, failed},
			[]string{"ports=[p:8080] ready=[a] notReady=[]"}},
		{"publishNotReadyAddresses keeps unready and terminating as ready", svc(func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
			[]*corev1.Pod{testPod("b", "10.0.0.2", false), terminating}, []string{"ports=[p:8080] ready=[b,t] notReady=[]"}},
		{"named port per pod", svc(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http") }),
			[]*corev1.Pod{testPod("a", "10.0.0.1", true, http(8080)), testPod("b", "10.0.0.2", true, http(9090)), testPod("c", "10.0.0.3", true)},
			[]string{"ports=[p:8080] ready=[a] notReady=[]", "ports=[p:9090] ready=[b] notReady=[]"}},
		{"two ports, one subset", svc(func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "q", Port: 81, TargetPort: intstr.FromInt32(8081), Protocol: corev1.ProtocolTCP})
		}), []*corev1.Pod{testPod("a", "10.0.0.1", true), testPod("b", "10.0.0.2", true)},
			[]string{"ports=[p:8080,q:8081] ready=[a,b] notReady=[]"}},
		{"headless without ports", svc(func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.Ports = corev1.ClusterIPNone, nil }),
			[]*corev1.Pod{testPod("a", "10.0.0.1", true)}, []string{"ports=[] ready=[a] notReady=[]"}},
		{"no IP in the Service's family", svc(func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }),
			[]*corev1.Pod{testPod("a", "10.0.0.1", true)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describeEndpoints(&corev1.Endpoints{Subsets: desiredSubsets(tt.svc, tt.pods)})
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestOverCapacity: beyond 1000 addresses the Endpoints are truncated,
// ready addresses first, and annotated over-capacity; back under, the
// annotation goes.
func TestOverCapacity(t *testing.T) {
	tests := []struct {
		name                  string
		ready, notReady       int
		wantReady, wantNotRdy int
		wantAnnotation        bool
	}{
		{"under", 600, 400, 600, 400, false},
		{"not ready cut first", 900, 300, 900, 100, true},
		{"ready cut, not ready dropped", 1200, 50, 1000, 0, true},
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{
		ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Name: "p", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pods []*corev1.Pod
			for i := range tt.ready + tt.notReady {
				pods = append(pods, testPod(fmt.Sprintf("p%d", i), fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256), i < tt.ready))
			}
			current := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web",
				Annotations: map[string]string{corev1.EndpointsOverCapacity: truncated}}}
			ep := desiredEndpoints(current, svc, desiredSubsets(svc, pods), time.Time{})
			r, nr := 0, 0
			for _, s := range ep.Subsets {
				r += len(s.Addresses)
				nr += len(s.NotReadyAddresses)
			}
			_, annotated := ep.Annotations[corev1.EndpointsOverCapacity]
			if r != tt.wantReady || nr != tt.wantNotRdy || annotated != tt.wantAnnotation {
				t.Errorf("ready %d, not ready %d, annotated %v; want %d, %d, %v", r, nr, annotated, tt.wantReady, tt.wantNotRdy, tt.wantAnnotation)
			}
			if _, ok := ep.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
				t.Errorf("trigger time annotation with no trigger time")
			}
		})
	}
}
