// Package events is the consumer side of cairn's log: the envelope of an
// event, the subjects and streams it is published on, where the log ends
// (ReadLogEnd, WaitPublished), and tools to read it (Tail, SeekRevision).
// It links no etcd client: the etcd side (the publisher that moves every
// committed change from etcd to NATS JetStream exactly once and in commit
// order, the compactor, and Verify) is package events/publish, linked only
// by the apiserver and tools. The etcd key format (RegistryKey) and the log
// positions (Position, the Nats-Msg-Id) are here, since both sides and the
// consumers of history share them.
//
// # The envelope
//
// Every change to an API object is one Event, published as JSON:
//
//   - id: a ULID, chosen by the apiserver before the write (WriteMeta.ID);
//     writes that did not come through the apiserver get a fresh one.
//   - revision: the etcd revision of the change. It is also the object's
//     metadata.resourceVersion and the message's Nats-Msg-Id.
//   - type: ADDED (the key was created in this revision), MODIFIED or
//     DELETED, spelled as Kubernetes watch events spell them.
//   - group, version, resource, kind: what the object is; group is "" for
//     the core group. group and resource come from the etcd key, version and
//     kind from the object's apiVersion and kind.
//   - namespace (empty when cluster-scoped), name, uid (metadata.uid).
//   - nodeName: spec.nodeName of a pod, empty otherwise.
//   - partition: the subject partition (see Partitions), omitted when
//     the event has none.
//   - object: the full object after the change, for DELETED its last state,
//     with metadata.resourceVersion set to revision.
//   - verb: the API verb (create, update, patch, delete, ...).
//   - actor: the authenticated user, its groups, and its uid and extra when
//     the authenticator gives them; empty for foreign writes.
//   - auditID: the apiserver's audit id of the request.
//   - causationID: the id of the event the writer was reacting to.
//   - correlationID: the id of the root of the chain (the kubectl apply that
//     started a rollout); an event that starts a chain is its own root.
//   - sourceIP: the client address.
//   - time: when the apiserver made the write (WriteMeta.Time); for foreign
//     writes, when the publisher read it.
//   - admission: what admission webhooks did to the write, omitted when no
//     webhook changed or annotated it (added after the first release:
//     older events have none, and readers must treat it as optional):
//     mutatedBy, the names of the mutating webhooks that changed the
//     object, in call order; annotations, the audit annotations as
//     kube-apiserver records them ("<webhook>/<key>" for a webhook's own
//     auditAnnotations, "mutation.webhook.admission.k8s.io/round_R_index_I"
//     for each mutating call: {"configuration","webhook","mutated"}). Only
//     the object the write names carries it (not the other objects of a
//     multi-object transaction).
//
// # Subjects
//
// Subjects are an index: they carry what consumers filter on, so JetStream
// filters on the server and a consumer receives only what it needs:
//
//	cairn.ev.<group>.<resource>.<node>.<namespace>.<name>.<partition>
//
// group is "core" for the legacy group; node is the pod's spec.nodeName;
// partition is the object's controller's partition (below); every token
// goes through Token, which turns dots (legal in names and groups) into
// '~' and the empty string into "_". Examples:
//
//	cairn.ev.core.pods.node-1.default.web-5d4f-x2k.17  a pod of ReplicaSet web-5d4f, bound to node-1
//	cairn.ev.core.pods._.default.web-1._                a pod with no controller, not yet scheduled
//	cairn.ev.apps.deployments._.default.web._           a deployment
//	cairn.ev.core.nodes._._.node-1._                    a node (cluster-scoped)
//
// Filter builds the subscriptions (PartitionFilter for one partition):
//
//	kubelet of node-1     cairn.ev.core.pods.node-1.*.*.*  (Filter("", "pods", "node-1", "", ""))
//	scheduler             cairn.ev.core.pods._.*.*.*  and  cairn.ev.core.nodes.*.*.*.*
//	deployment controller cairn.ev.apps.deployments.*.*.*.*  and  cairn.ev.apps.replicasets.*.*.*.*
//	one namespace         cairn.ev.*.*.*.<namespace>.*.*
//	controller-manager replica owning partitions 3 and 17
//	                      cairn.ev.core.pods.*.*.*.3, ….17 and ….pods.*.*.*._
//
// so a kubelet's traffic grows with its own pods, not with the cluster.
//
// # Partitions
//
// The partition of an object with a controller owner (the ownerReference
// with controller: true) is Partition(namespace, controller name):
// KeyHash("<namespace>/<controller>") % Partitions, with Partitions = 32.
// Every object one controller owns shares that token, so a scaled-out
// controller manager, whose replicas each own some partitions of the
// controllers' keys (package events/consumer/shard hashes keys with
// KeyHash too), receives the pods of its own ReplicaSets only, instead of
// every pod. An object without a controller has no partition ("_"), and
// every partition's consumers receive it.
//
// A write that changes the controller (adoption, release) moves the object
// to another partition. Its event must reach the consumers of both, so it
// goes out on "_": the apiserver, which has the previous state, marks such
// writes (WriteMeta.Moved). The publisher sends every other update it
// cannot vouch for on "_" too: the updates of foreign writes (no
// WriteMeta) and of the objects of a multi-object transaction other than
// the one WriteMeta names. Creates and deletes cannot move an object and
// always carry its partition. A consumer that follows some partitions
// drops an object that arrives on "_" with a controller in another one
// (events/consumer: Cache.SetPartitions).
//
// The partition is in the envelope too (partition, omitted when empty), so
// Subject can rebuild the subject from a decoded event. Logs written before
// the partition token existed have seven-token subjects: ParseSubject reads
// them (with no partition), but the filters Filter builds do not match
// them.
//
// # Streams
//
// Stream CAIRN holds subjects cairn.ev.>: every change except Leases, on
// file storage, with no age, size or count limit by default (the history is
// the point), a 2 minute duplicate window, 8 MiB messages, direct gets
// allowed (for SeekRevision and reads from any replica) and deletes denied.
//
// Stream CAIRN_LEASES holds subjects cairn.lease.>: coordination.k8s.io
// Leases, with MaxMsgsPerSubject 1. EnsureStreams creates or updates both;
// StreamConfig.Replicas is 1 embedded and 3 on a NATS cluster.
//
// # Message headers
//
// Every message carries:
//
//	Nats-Msg-Id      the revision ("1234"); "1234-<i>" for the i-th extra
//	                 object of a transaction that changed several objects
//	Cairn-Revision   the revision
//	Cairn-Type       ADDED, MODIFIED or DELETED
//
// # Request headers
//
// A client that writes because of an event sets, on its API request,
//
//	X-Cairn-Causation-Id     the id of the event it reacted to
//	X-Cairn-Correlation-Id   that event's correlationID
//
// The apiserver copies them into WriteMeta. When the correlation id is
// absent, the event's correlation id is the event's own id: it starts a new
// chain. Write responses carry X-Cairn-Event-Id, the id of the event the
// write produced.
//
// # Reading the log
//
// Every reader of the log goes through Reader (Read for a callback): one
// ordered consumer on one stream, filtered on the server by subject
// (ReadOptions.Filters), from a stream sequence (SeekRevision turns a
// revision into one), either to the end the stream had when it was opened
// or, with Follow, for ever. Stop deletes its consumer from the server.
// The controllers' caches (events/consumer), the apiserver's watch hub,
// the history projection, replay, Tail and Verify all read through it.
//
// # Exactly once
//
// Package events/publish documents how the log is made: one etcd
// transaction per change with its WriteMeta, one elected publisher, and
// expected-last-sequence checks on every publish, so that the two streams
// together always hold a prefix of the changes in revision order.
//
// # Leases
//
// Every node renews its Lease every few seconds; on the main stream these
// heartbeats would drown the history. Lease changes go to CAIRN_LEASES
// instead (IsLease), which keeps one message per subject, i.e. per lease:
// the log always holds each lease's latest state, and a consumer (the node
// lifecycle controller) can read all of them with one subject filter, but
// the heartbeats never reach CAIRN and never grow the history. The
// publisher's order and exactly-once rules apply to the lease stream too.
package events
