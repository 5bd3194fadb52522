// Package timeline builds the life of one object from the history store:
// every change with time, revision, actor and a short diff, and the causal
// chain it belongs to.
//
// Down the chain, the rows are the objects the root owns (ownerReferences):
// a Deployment's ReplicaSets and their Pods, with every change of each,
// including bindings (the scheduler setting spec.nodeName) and container
// starts (the kubelet reporting Running and Ready). Up the chain, from a
// Pod, the rows are its owners and the events on its causal path: each
// event's causation id names the event its writer reacted to, and the
// correlation id names the write that started the chain (the user's
// kubectl apply), marked as the origin.
//
// Each step carries its latency from its cause: the event named by its
// causation id when that is in the timeline, otherwise the previous change
// of the same object. Steps are in log order, which is causal order: a
// writer reacts only to events already committed.
package timeline
