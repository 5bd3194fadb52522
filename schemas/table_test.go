package schemas

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(testNow.Add(-d)) }

func TestPodStatusColumn(t *testing.T) {
	res := mustLookup(t, testRegistry(), "", "pods")
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	always := corev1.ContainerRestartPolicyAlways
	tests := []struct {
		name                   string
		pod                    func(*corev1.Pod)
		ready, status, restart string
	}{
		{"pending", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }, "0/1", "Pending", "0"},
		{"running", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, State: running}}
		}, "1/1", "Running", "0"},
		{"crash loop", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{
				Name: "app", RestartCount: 5,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(90 * time.Second)}},
			}}
		}, "0/1", "CrashLoopBackOff", "5 (90s ago)"},
		{"init waiting", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init"}}
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}, "0/1", "Init:0/1", "0"},
		{"init crash", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init"}}
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", RestartCount: 2,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
		}, "0/1", "Init:CrashLoopBackOff", "2"},
		{"init exit code", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init"}}
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}}}
		}, "0/1", "Init:ExitCode:3", "0"},
		{"sidecar counts", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always}}
			p.Status.Phase = corev1.PodRunning
			started := true
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", Ready: true, Started: &started, State: running}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, State: running}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}
		}, "2/2", "Running", "0"},
		{"completed", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}
		}, "0/1", "Completed", "0"},
		{"terminating", func(p *corev1.Pod) {
			now := ago(time.Second)
			p.DeletionTimestamp = &now
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, State: running}}
		}, "1/1", "Terminating", "0"},
		{"deleted but finished", func(p *corev1.Pod) {
			now := ago(time.Second)
			p.DeletionTimestamp = &now
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}}
		}, "0/1", "Error", "0"},
		{"node lost", func(p *corev1.Pod) {
			now := ago(time.Second)
			p.DeletionTimestamp = &now
			p.Status.Phase = corev1.PodRunning
			p.Status.Reason = "NodeLost"
		}, "0/1", "Unknown", "0"},
		{"scheduling gated", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Reason: "SchedulingGated"}}
		}, "0/1", "SchedulingGated", "0"},
		{"signal", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Signal: 9}}}}
		}, "0/1", "Signal:9", "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod("web-0")
			pod.CreationTimestamp = ago(3 * time.Hour)
			tt.pod(pod)
			row := res.Table.Row(pod)
			if len(row) != len(res.Table.Columns()) {
				t.Fatalf("%d cells for %d columns", len(row), len(res.Table.Columns()))
			}
			want := []any{"web-0", tt.ready, tt.status, tt.restart, "3h"}
			if !slices.Equal(row[:5], want) {
				t.Errorf("got %v, want %v", row[:5], want)
			}
		})
	}
}

func TestTables(t *testing.T) {
	r := testRegistry()
	age := ago(49 * time.Hour)
	meta := metav1.ObjectMeta{Name: "x", Namespace: "default", CreationTimestamp: age}
	cluster := metav1.ObjectMeta{Name: "x", CreationTimestamp: age}
	holder := "node-1"
	two := intstr.FromInt32(2)
	tests := []struct {
		group, plural string
		obj           Object
		headers       []string
		row           []any
	}{
		{"", "pods", func() Object {
			p := newPod("x")
			p.CreationTimestamp = age
			p.Spec.NodeName = "n1"
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.5"}}
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/ok"}}
			return p
		}(),
			[]string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"},
			[]any{"x", "0/1", "", "0", "2d1h", "10.0.0.5", "n1", "<none>", "0/1"}},
		{"apps", "deployments", func() Object {
			d := newDeployment("x")
			d.ObjectMeta.CreationTimestamp = age
			d.Spec.Replicas = ptrTo[int32](3)
			d.Status = appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}
			return d
		}(),
			[]string{"Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"},
			[]any{"x", "2/3", int64(3), int64(2), "2d1h", "app", "nginx", "app=web"}},
		{"apps", "replicasets", func() Object {
			rs := newReplicaSet("x")
			rs.ObjectMeta.CreationTimestamp = age
			rs.Spec.Replicas = ptrTo[int32](3)
			rs.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 1}
			return rs
		}(),
			[]string{"Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"},
			[]any{"x", int64(3), int64(3), int64(1), "2d1h", "app", "nginx", "app=web"}},
		{"", "nodes", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x", CreationTimestamp: age, Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
			Spec: corev1.NodeSpec{Unschedulable: true},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.2"}},
				NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", ContainerRuntimeVersion: "cairn://0.1"},
			}},
			[]string{"Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"},
			[]any{"x", "Ready,SchedulingDisabled", "control-plane", "2d1h", "v1.37.2", "192.168.1.2", "<none>", "<unknown>", "<unknown>", "cairn://0.1"}},
		{"", "namespaces", &corev1.Namespace{ObjectMeta: cluster, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			[]string{"Name", "Status", "Age"}, []any{"x", "Active", "2d1h"}},
		{"", "configmaps", &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": nil}},
			[]string{"Name", "Data", "Age"}, []any{"x", int64(2), "2d1h"}},
		{"", "secrets", &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a": nil}},
			[]string{"Name", "Type", "Data", "Age"}, []any{"x", "Opaque", int64(1), "2d1h"}},
		{"", "events", &corev1.Event{ObjectMeta: meta, Type: "Warning", Reason: "BackOff", Message: " Back-off restarting \n",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-0", FieldPath: "spec.containers{app}"},
			Source:         corev1.EventSource{Component: "kubelet", Host: "n1"},
			FirstTimestamp: ago(10 * time.Minute), LastTimestamp: ago(30 * time.Second), Count: 4},
			[]string{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"},
			[]any{"30s", "Warning", "BackOff", "pod/web-0", "spec.containers{app}", "kubelet, n1", "Back-off restarting", "10m", int64(4), "x"}},
		{"coordination.k8s.io", "leases", &coordinationv1.Lease{ObjectMeta: meta, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}},
			[]string{"Name", "Holder", "Age"}, []any{"x", "node-1", "2d1h"}},
		{"policy", "poddisruptionbudgets", &policyv1.PodDisruptionBudget{ObjectMeta: meta,
			Spec:   policyv1.PodDisruptionBudgetSpec{MinAvailable: &two},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}},
			[]string{"Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"}, []any{"x", "2", "N/A", int64(1), "2d1h"}},
		{"scheduling.k8s.io", "priorityclasses", &schedulingv1.PriorityClass{ObjectMeta: cluster, Value: 1000},
			[]string{"Name", "Value", "Global-Default", "Age", "PreemptionPolicy"}, []any{"x", int64(1000), false, "2d1h", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.plural, func(t *testing.T) {
			res := mustLookup(t, r, tt.group, tt.plural)
			var headers []string
			for _, c := range res.Table.Columns() {
				headers = append(headers, c.Name)
				if c.Description == "" {
					t.Errorf("column %s has no description", c.Name)
				}
				if c.Name == "Name" && c.Format != "name" {
					t.Errorf("Name column format %q", c.Format)
				}
			}
			if !slices.Equal(headers, tt.headers) {
				t.Errorf("headers %v", headers)
			}
			if row := res.Table.Row(tt.obj); !slices.Equal(row, tt.row) {
				t.Errorf("row %#v\nwant %#v", row, tt.row)
			}
		})
	}
}

func TestFields(t *testing.T) {
	r := testRegistry()
	pod := newPod("p")
	pod.Spec.NodeName = "n1"
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.SchedulerName = "default-scheduler"
	pod.Spec.ServiceAccountName = "sa"
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}, NominatedNodeName: "n2"}
	rs := newReplicaSet("r")
	rs.Status.Replicas = 3
	tests := []struct {
		group, plural string
		obj           Object
		want          fields.Set
	}{
		{"", "pods", pod, fields.Set{
			"metadata.name": "p", "metadata.namespace": "default",
			"spec.nodeName": "n1", "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
			"spec.serviceAccountName": "sa", "spec.hostNetwork": "false", "status.phase": "Running",
			"status.podIP": "10.0.0.1", "status.nominatedNodeName": "n2",
		}},
		{"", "nodes", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Unschedulable: true}},
			fields.Set{"metadata.name": "n", "spec.unschedulable": "true"}},
		{"", "namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NamespaceStatus{Phase: "Active"}},
			fields.Set{"metadata.name": "n", "name": "n", "status.phase": "Active"}},
		{"", "secrets", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "d"}, Type: corev1.SecretTypeTLS},
			fields.Set{"metadata.name": "s", "metadata.namespace": "d", "type": "kubernetes.io/tls"}},
		{"", "configmaps", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "d"}},
			fields.Set{"metadata.name": "c", "metadata.namespace": "d"}},
		{"apps", "replicasets", rs, fields.Set{"metadata.name": "r", "metadata.namespace": "default", "status.replicas": "3"}},
		{"apps", "deployments", newDeployment("d"), fields.Set{"metadata.name": "d", "metadata.namespace": "default"}},
		{"", "events", &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "d"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "d", Name: "p", UID: "u", APIVersion: "v1", ResourceVersion: "7", FieldPath: "spec"},
			Reason:         "Started", Type: "Normal", ReportingController: "kubelet"},
			fields.Set{"metadata.name": "e", "metadata.namespace": "d",
				"involvedObject.kind": "Pod", "involvedObject.namespace": "d", "involvedObject.name": "p", "involvedObject.uid": "u",
				"involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "7", "involvedObject.fieldPath": "spec",
				"reason": "Started", "reportingComponent": "kubelet", "source": "kubelet", "type": "Normal"}},
		{"scheduling.k8s.io", "priorityclasses", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "pc"}},
			fields.Set{"metadata.name": "pc"}},
		{"policy", "poddisruptionbudgets", newPodDisruptionBudget("b"),
			fields.Set{"metadata.name": "b", "metadata.namespace": "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.plural, func(t *testing.T) {
			got := mustLookup(t, r, tt.group, tt.plural).Fields(tt.obj)
			if got.String() != tt.want.String() {
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestPodDisruptionBudgetTable checks the budget columns kubectl get pdb
// prints: an IntOrString as its String(), N/A when unset.
func TestPodDisruptionBudgetTable(t *testing.T) {
	res := mustLookup(t, testRegistry(), "policy", "poddisruptionbudgets")
	intOrStr := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	tests := []struct {
		name                 string
		spec                 policyv1.PodDisruptionBudgetSpec
		allowed              int32
		minAvail, maxUnavail string
	}{
		{"min available int", policyv1.PodDisruptionBudgetSpec{MinAvailable: intOrStr(intstr.FromInt32(0))}, 0, "0", "N/A"},
		{"max unavailable percent", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: intOrStr(intstr.FromString("25%"))}, 3, "N/A", "25%"},
		{"neither", policyv1.PodDisruptionBudgetSpec{}, 0, "N/A", "N/A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pdb := &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: ago(90 * time.Second)},
				Spec:       tt.spec, Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: tt.allowed},
			}
			want := []any{"b", tt.minAvail, tt.maxUnavail, int64(tt.allowed), "90s"}
			if row := res.Table.Row(pdb); !slices.Equal(row, want) {
				t.Errorf("row %#v\nwant %#v", row, want)
			}
		})
	}
}
