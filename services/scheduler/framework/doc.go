// Package framework is the scheduler's filter/score framework: the model of
// the cluster the scheduler decides on (Snapshot, NodeInfo, PodInfo), the
// plugin interfaces, and Framework, which runs plugins to place one pod.
// It follows the Kubernetes scheduling framework (KEP-624) and reproduces
// kube-scheduler's semantics and messages; the plugins themselves live in
// package plugins.
//
// # The model
//
// A Snapshot holds every node as a NodeInfo: the Node object, the pods
// counted on it (bound ones, and ones the scheduler assumed while their
// binding is in flight), and aggregates the plugins read without walking
// pods: requested resources (Requested, and NonZeroRequested with kube's
// 100m / 200Mi defaults for scoring), host ports in use, images present.
// The Snapshot is updated incrementally (AddNode, RemoveNode, AddPod,
// RemovePod), never rebuilt per pod. It also keeps indexes (index.go) so
// that inter-pod affinity and topology spread cost what the pod at hand
// concerns, not the size of the cluster: counted pods by (namespace,
// label key=value) (EachPodMatching: the pods a selector selects), the
// (anti-)affinity terms of counted pods filed by the label values their
// selectors require (EachAntiAffinityTerm, EachScoringTerm: the terms that
// select a given pod); and it interns the nodes' label keys and values as
// small integers (topology.go: TopologyKey, NodeInfo.TopologyValue,
// TopologyDomains), so that counting per topology domain costs an index,
// not a label-map lookup, per node. Topology values are read from the node
// when a cycle counts, so a node's label change re-indexes no pod.
//
// A PodInfo is a pod with what every cycle needs computed once: its
// priority, its requests (containers summed, sidecars added, raised to the
// largest init container, plus overhead: kube's PodRequests, as
// fit.PodRequests, the rule the apiserver's binding check applies too) and
// its parsed affinity terms.
//
// # A scheduling cycle
//
// Schedule runs, for one pod:
//
//  1. PreFilter: each plugin precomputes into the CycleState (e.g. domain
//     counts for topology spread), may reject the pod for all nodes, or Skip
//     its Filter when it has nothing to check.
//  2. Filter: each node is checked by the Filter plugins in order, stopping at
//     the first rejection, whose reasons explain that node. Nodes are visited
//     from where the previous cycle stopped, in parallel (workers take 8
//     nodes at a time), and filtering stops once NumFeasibleNodesToFind
//     nodes fit (kube's percentageOfNodesToScore: all nodes up to 100, then
//     an adaptive share). Plugins return shared, pre-tagged statuses for
//     their rejections (Status.WithPlugin), and the statuses are gathered
//     into the Diagnosis only when no node fits.
//  3. With no feasible node Schedule returns a *FitError, whose message is
//     kube-scheduler's: "0/5 nodes are available: 3 Insufficient cpu, 2
//     node(s) had untolerated taint {dedicated: gpu}." The caller appends
//     preemption's outcome (Diagnosis.PostFilterMsg).
//  4. Otherwise PreScore, Score (0..100 per plugin, or raw scores rescaled by
//     NormalizeScore), times each plugin's weight, summed; the highest total
//     wins, ties broken at random.
//
// Status codes carry what preemption needs: Unschedulable means removing
// pods could help, UnschedulableAndUnresolvable that it cannot.
//
// # Nominated pods and what-if changes
//
// Pods nominated to a node by preemption (Snapshot.SetNominated) are counted
// by RunFilters for pods of lower or equal priority, so the room made for a
// preemptor is not taken by others. Plugins whose PreFilter state depends on
// other pods implement PreFilterExtensions (AddPod, RemovePod) so that
// preemption can evaluate "this node without these pods" on a cloned
// NodeInfo and CycleState.
//
// # Concurrency
//
// Snapshot and NodeInfo are not locked: the owner (the scheduler's cache)
// takes a write lock to change them and a read lock around Schedule.
// Filter and Score plugins run concurrently on different nodes and only
// read. One Framework runs one Schedule at a time (it reuses its scratch
// buffers from cycle to cycle).
package framework
