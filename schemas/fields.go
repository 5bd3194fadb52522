package schemas

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// The kinds' own field-selector attributes, as their strategies'
// ToSelectableFields / GetAttrs give them. objectMetaFields adds
// metadata.name (and metadata.namespace) to each.

func podFields(pod *corev1.Pod) fields.Set {
	podIP := ""
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	return fields.Set{
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP,
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

func nodeFields(n *corev1.Node) fields.Set {
	return fields.Set{"spec.unschedulable": strconv.FormatBool(n.Spec.Unschedulable)}
}

func namespaceFields(ns *corev1.Namespace) fields.Set {
	return fields.Set{
		"status.phase": string(ns.Status.Phase),
		// A bug kube keeps for backwards compatibility.
		"name": ns.Name,
	}
}

func secretFields(s *corev1.Secret) fields.Set {
	return fields.Set{"type": string(s.Type)}
}

func eventFields(e *corev1.Event) fields.Set {
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}

func replicaSetFields(rs *appsv1.ReplicaSet) fields.Set {
	return fields.Set{"status.replicas": strconv.Itoa(int(rs.Status.Replicas))}
}
