package schemas

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file ports the column definitions and print funcs of
// k8s.io/kubernetes/pkg/printers/internalversion/printers.go. Rows are
// always the wide form (GenerateOptions{Wide: true}), which is what the
// apiserver's table convertor asks for.

func podTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
		{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
		{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
		ageColumn,
		{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
		{Name: "Node", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"]},
		{Name: "Nominated Node", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
		{Name: "Readiness Gates", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"]},
	}
	return tableOf(cols, func(p *corev1.Pod) []any { return podRow(p, now) })
}

// nodeUnreachablePodReason is the reason the node lifecycle controller sets
// on pods of an unreachable node.
const nodeUnreachablePodReason = "NodeLost"

// podRow is printPod.
func podRow(pod *corev1.Pod, now func() time.Time) []any {
	restarts, restartableInitRestarts := 0, 0
	total := len(pod.Spec.Containers)
	ready := 0
	var lastRestart, lastRestartableInitRestart metav1.Time

	phase := pod.Status.Phase
	reason := string(phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}

	initContainers := map[string]*corev1.Container{}
	for i := range pod.Spec.InitContainers {
		initContainers[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
		if isRestartableInitContainer(&pod.Spec.InitContainers[i]) {
			total++
		}
	}

	later := func(last *metav1.Time, cs corev1.ContainerStatus) {
		if t := cs.LastTerminationState.Terminated; t != nil && last.Before(&t.FinishedAt) {
			*last = t.FinishedAt
		}
	}

	initializing := false
	for i, c := range pod.Status.InitContainerStatuses {
		restarts += int(c.RestartCount)
		later(&lastRestart, c)
		restartable := isRestartableInitContainer(initContainers[c.Name])
		if restartable {
			restartableInitRestarts += int(c.RestartCount)
			later(&lastRestartableInitRestart, c)
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case restartable && c.Started != nil && *c.Started:
			if c.Ready {
				ready++
			}
			continue
		case c.State.Terminated != nil:
			// Initialization failed.
			if c.State.Terminated.Reason == "" {
				if c.State.Terminated.Signal != 0 {
					reason = fmt.Sprintf("Init:Signal:%d", c.State.Terminated.Signal)
				} else {
					reason = fmt.Sprintf("Init:ExitCode:%d", c.State.Terminated.ExitCode)
				}
			} else {
				reason = "Init:" + c.State.Terminated.Reason
			}
			initializing = true
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + c.State.Waiting.Reason
			initializing = true
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
			initializing = true
		}
		break
	}

	if !initializing || podConditionTrue(pod.Status.Conditions, corev1.PodInitialized) {
		restarts = restartableInitRestarts
		lastRestart = lastRestartableInitRestart
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			c := pod.Status.ContainerStatuses[i]
			restarts += int(c.RestartCount)
			later(&lastRestart, c)
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				reason = c.State.Waiting.Reason
			case c.State.Terminated != nil && c.State.Terminated.Reason != "":
				reason = c.State.Terminated.Reason
			case c.State.Terminated != nil && c.State.Terminated.Reason == "":
				if c.State.Terminated.Signal != 0 {
					reason = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
				} else {
					reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
				}
			case c.Ready && c.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		// Back to Running if a container still runs.
		if reason == "Completed" && hasRunning {
			if hasPodReadyCondition(pod.Status.Conditions) {
				reason = "Running"
			} else {
				reason = "NotReady"
			}
		}
	}

	if pod.DeletionTimestamp != nil && pod.Status.Reason == nodeUnreachablePodReason {
		reason = "Unknown"
	} else if pod.DeletionTimestamp != nil && phase != corev1.PodFailed && phase != corev1.PodSucceeded {
		reason = "Terminating"
	}

	restartsStr := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartsStr = fmt.Sprintf("%d (%s ago)", restarts, since(now, lastRestart))
	}

	podIP := "<none>"
	if len(pod.Status.PodIPs) > 0 && pod.Status.PodIPs[0].IP != "" {
		podIP = pod.Status.PodIPs[0].IP
	}
	gates := "<none>"
	if len(pod.Spec.ReadinessGates) > 0 {
		trueConditions := 0
		for _, g := range pod.Spec.ReadinessGates {
			for _, c := range pod.Status.Conditions {
				if c.Type == g.ConditionType {
					if c.Status == corev1.ConditionTrue {
						trueConditions++
					}
					break
				}
			}
		}
		gates = fmt.Sprintf("%d/%d", trueConditions, len(pod.Spec.ReadinessGates))
	}
	return []any{
		pod.Name, fmt.Sprintf("%d/%d", ready, total), reason, restartsStr, since(now, pod.CreationTimestamp),
		podIP, orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), gates,
	}
}

func isRestartableInitContainer(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func hasPodReadyCondition(cs []corev1.PodCondition) bool {
	for _, c := range cs {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// podConditionTrue is true when the first condition of type t is True.
func podConditionTrue(cs []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range cs {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

var (
	containersColumn = metav1.TableColumnDefinition{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."}
	imagesColumn     = metav1.TableColumnDefinition{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."}
)

// containerCells is layoutContainerCells.
func containerCells(cs []corev1.Container) (names, images string) {
	n := make([]string, len(cs))
	im := make([]string, len(cs))
	for i, c := range cs {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

func deploymentTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		{Name: "Up-to-date", Type: "string", Description: extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
		{Name: "Available", Type: "string", Description: extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
		ageColumn,
		containersColumn,
		imagesColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: extensionsv1beta1.DeploymentSpec{}.SwaggerDoc()["selector"]},
	}
	return tableOf(cols, func(d *appsv1.Deployment) []any {
		names, images := containerCells(d.Spec.Template.Spec.Containers)
		selector := "<invalid>"
		if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
			selector = s.String()
		}
		return []any{
			d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, int32OrZero(d.Spec.Replicas)),
			int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), since(now, d.CreationTimestamp),
			names, images, selector,
		}
	})
}

func replicaSetTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Desired", Type: "integer", Description: extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
		{Name: "Current", Type: "integer", Description: extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
		{Name: "Ready", Type: "integer", Description: extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
		ageColumn,
		containersColumn,
		imagesColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()["selector"]},
	}
	return tableOf(cols, func(rs *appsv1.ReplicaSet) []any {
		names, images := containerCells(rs.Spec.Template.Spec.Containers)
		return []any{
			rs.Name, int64(int32OrZero(rs.Spec.Replicas)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
			since(now, rs.CreationTimestamp), names, images, metav1.FormatLabelSelector(rs.Spec.Selector),
		}
	})
}

func nodeTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: "The status of the node"},
		{Name: "Roles", Type: "string", Description: "The roles of the node"},
		ageColumn,
		{Name: "Version", Type: "string", Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]},
		{Name: "Internal-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
		{Name: "External-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
		{Name: "OS-Image", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]},
		{Name: "Kernel-Version", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]},
		{Name: "Container-Runtime", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]},
	}
	return tableOf(cols, func(n *corev1.Node) []any {
		var status []string
		for _, c := range n.Status.Conditions {
			if c.Type != corev1.NodeReady {
				continue
			}
			if c.Status == corev1.ConditionTrue {
				status = append(status, string(c.Type))
			} else {
				status = append(status, "Not"+string(c.Type))
			}
			break
		}
		if len(status) == 0 {
			status = append(status, "Unknown")
		}
		if n.Spec.Unschedulable {
			status = append(status, "SchedulingDisabled")
		}
		roles := strings.Join(nodeRoles(n), ",")
		info := n.Status.NodeInfo
		return []any{
			n.Name, strings.Join(status, ","), orNone(roles), since(now, n.CreationTimestamp), info.KubeletVersion,
			nodeAddress(n, corev1.NodeInternalIP), nodeAddress(n, corev1.NodeExternalIP),
			orUnknown(info.OSImage), orUnknown(info.KernelVersion), orUnknown(info.ContainerRuntimeVersion),
		}
	})
}

// nodeRoles is findNodeRoles: node-role.kubernetes.io/<role> labels and
// the kubernetes.io/role label, sorted.
func nodeRoles(n *corev1.Node) []string {
	const rolePrefix, roleLabel = "node-role.kubernetes.io/", "kubernetes.io/role"
	set := map[string]bool{}
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, rolePrefix):
			if r := strings.TrimPrefix(k, rolePrefix); r != "" {
				set[r] = true
			}
		case k == roleLabel && v != "":
			set[v] = true
		}
	}
	roles := make([]string, 0, len(set))
	for r := range set {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	return roles
}

func nodeAddress(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

func namespaceTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: "The status of the namespace"},
		ageColumn,
	}
	return tableOf(cols, func(ns *corev1.Namespace) []any {
		return []any{ns.Name, string(ns.Status.Phase), since(now, ns.CreationTimestamp)}
	})
}

func configMapTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"]},
		ageColumn,
	}
	return tableOf(cols, func(cm *corev1.ConfigMap) []any {
		return []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), since(now, cm.CreationTimestamp)}
	})
}

func secretTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"]},
		{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"]},
		ageColumn,
	}
	return tableOf(cols, func(s *corev1.Secret) []any {
		return []any{s.Name, string(s.Type), int64(len(s.Data)), since(now, s.CreationTimestamp)}
	})
}

func eventTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		{Name: "Last Seen", Type: "string", Description: corev1.Event{}.SwaggerDoc()["lastTimestamp"]},
		{Name: "Type", Type: "string", Description: corev1.Event{}.SwaggerDoc()["type"]},
		{Name: "Reason", Type: "string", Description: corev1.Event{}.SwaggerDoc()["reason"]},
		{Name: "Object", Type: "string", Description: corev1.Event{}.SwaggerDoc()["involvedObject"]},
		{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.Event{}.InvolvedObject.SwaggerDoc()["fieldPath"]},
		{Name: "Source", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["source"]},
		{Name: "Message", Type: "string", Description: corev1.Event{}.SwaggerDoc()["message"]},
		{Name: "First Seen", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["firstTimestamp"]},
		{Name: "Count", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["count"]},
		{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	}
	return tableOf(cols, func(e *corev1.Event) []any {
		first := since(now, e.FirstTimestamp)
		if e.FirstTimestamp.IsZero() {
			first = sinceMicro(now, e.EventTime)
		}
		last := since(now, e.LastTimestamp)
		if e.LastTimestamp.IsZero() {
			last = first
		}
		count := e.Count
		if e.Series != nil {
			last = sinceMicro(now, e.Series.LastObservedTime)
			count = e.Series.Count
		} else if count == 0 {
			// Singleton events of the new API have no count.
			count = 1
		}
		target := strings.ToLower(e.InvolvedObject.Kind)
		if e.InvolvedObject.Name != "" {
			target += "/" + e.InvolvedObject.Name
		}
		return []any{
			last, e.Type, e.Reason, target, e.InvolvedObject.FieldPath,
			eventSource(e), strings.TrimSpace(e.Message), first, int64(count), e.Name,
		}
	})
}

// eventSource is formatEventSource: component and host, falling back to
// the reporting controller and instance.
func eventSource(e *corev1.Event) string {
	component := e.Source.Component
	if component == "" {
		component = e.ReportingController
	}
	host := e.Source.Host
	if host == "" {
		host = e.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}

func leaseTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
		ageColumn,
	}
	return tableOf(cols, func(l *coordinationv1.Lease) []any {
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		return []any{l.Name, holder, since(now, l.CreationTimestamp)}
	})
}

func podDisruptionBudgetTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Min Available", Type: "string", Description: "The minimum number of pods that must be available."},
		{Name: "Max Unavailable", Type: "string", Description: "The maximum number of pods that may be unavailable."},
		{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
		ageColumn,
	}
	return tableOf(cols, func(pdb *policyv1.PodDisruptionBudget) []any {
		return []any{
			pdb.Name, intOrStringOrNA(pdb.Spec.MinAvailable), intOrStringOrNA(pdb.Spec.MaxUnavailable),
			int64(pdb.Status.DisruptionsAllowed), since(now, pdb.CreationTimestamp),
		}
	})
}

// intOrStringOrNA is how printPodDisruptionBudget prints an optional
// IntOrString.
func intOrStringOrNA(v *intstr.IntOrString) string {
	if v == nil {
		return "N/A"
	}
	return v.String()
}

func priorityClassTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Value", Type: "integer", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["value"]},
		{Name: "Global-Default", Type: "boolean", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["globalDefault"]},
		ageColumn,
		{Name: "PreemptionPolicy", Type: "string", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["preemptionPolicy"]},
	}
	return tableOf(cols, func(pc *schedulingv1.PriorityClass) []any {
		policy := ""
		if pc.PreemptionPolicy != nil {
			policy = string(*pc.PreemptionPolicy)
		}
		return []any{pc.Name, int64(pc.Value), pc.GlobalDefault, since(now, pc.CreationTimestamp), policy}
	})
}
