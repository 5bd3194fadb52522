// Package plugins holds the scheduler's filter and score plugins, with
// kube-scheduler's semantics, reasons and default weights:
//
//	Filter                     reasons (as kube words them)
//	NodeUnschedulable          node(s) were unschedulable
//	NodeName                   node(s) didn't match the requested node name
//	TaintToleration            node(s) had untolerated taint {key: value}
//	NodeAffinity               node(s) didn't match Pod's node affinity/selector
//	NodePorts                  node(s) didn't have free ports for the requested pod ports
//	NodeResourcesFit           Insufficient cpu|memory|ephemeral-storage, Too many pods
//	PodTopologySpread          node(s) didn't match pod topology spread constraints [(missing required label)]
//	InterPodAffinity           node(s) didn't match pod affinity rules | anti-affinity rules,
//	                           node(s) didn't satisfy existing pods anti-affinity rules
//
//	Score (weight)             what scores high
//	TaintToleration (3)        few untolerated PreferNoSchedule taints
//	NodeAffinity (2)           matching preferred node affinity terms
//	PodTopologySpread (2)      few matching pods in the domain (ScheduleAnyway)
//	InterPodAffinity (2)       preferred (anti-)affinity, both directions
//	NodeResourcesFit (1)       LeastAllocated cpu and memory
//	BalancedAllocation (1)     cpu and memory used alike
//	ImageLocality (1)          images already on the node
//
// Default returns them in kube's order; NewDefaultFramework builds a
// framework with them. InterPodAffinity and PodTopologySpread count per
// topology domain from the snapshot's indexes (framework/index.go,
// topology.go): only the pods their selectors can select and the placed
// terms that can select the pod are visited, and domains are interned
// integers, so a cycle costs what the pod concerns, not the number of pods
// in the cluster. Not implemented: extended resources, volumes,
// namespaceSelector with labels (an empty selector means all namespaces),
// cluster-level default spread constraints, PodDisruptionBudgets.
package plugins
