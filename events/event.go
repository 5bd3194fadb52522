package events

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// Revision is an etcd revision. Every committed change to an API object has
// one; it is also the object's resourceVersion and the event's Nats-Msg-Id.
type Revision int64

// String renders the revision the way resourceVersion carries it.
func (r Revision) String() string { return strconv.FormatInt(int64(r), 10) }

// ParseRevision parses a resourceVersion. The empty string is revision 0.
func ParseRevision(s string) (Revision, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, ErrBadRevision
	}
	return Revision(n), nil
}

// Type is the kind of change an event records.
type Type string

// The three kinds of change, spelled as Kubernetes watch events spell them.
const (
	Added    Type = "ADDED"
	Modified Type = "MODIFIED"
	Deleted  Type = "DELETED"
)

// Actor is the authenticated user who made a change: kube's user.Info.
// UID and Extra are what the authenticator knows besides the name and
// groups (for a service account's bound token: the ServiceAccount's UID,
// and the pod, node and credential id under authentication.kubernetes.io/
// keys, as kube-apiserver sets them).
type Actor struct {
	User   string              `json:"user"`
	UID    string              `json:"uid,omitempty"`
	Groups []string            `json:"groups,omitempty"`
	Extra  map[string][]string `json:"extra,omitempty"`
}

// WriteMeta is what the apiserver knows about a write besides the object. It
// is committed in the same etcd transaction as the object (under MetaKey), so
// the publisher can rebuild the full event from etcd alone after any crash.
type WriteMeta struct {
	// ID is the event id (a ULID) chosen by the apiserver before the write.
	ID string `json:"id"`
	// Verb is the API verb that caused the change: create, update, patch,
	// delete, deletecollection (and the subresource, e.g. "update status").
	Verb          string    `json:"verb"`
	Actor         Actor     `json:"actor"`
	AuditID       string    `json:"auditID,omitempty"`
	CausationID   string    `json:"causationID,omitempty"`
	CorrelationID string    `json:"correlationID,omitempty"`
	SourceIP      string    `json:"sourceIP,omitempty"`
	UserAgent     string    `json:"userAgent,omitempty"`
	Time          time.Time `json:"time"`
	// Key is the etcd key of the object this transaction changes.
	Key string `json:"key"`
	// Moved is set when the write changes the object's controller owner
	// (adoption, release): the event then goes out on partition Empty, so
	// that the consumers of the old partition see the object leave (see
	// Partition).
	Moved bool `json:"moved,omitempty"`
	// Admission is what admission webhooks did to the write; nil when no
	// webhook changed or annotated it.
	Admission *Admission `json:"admission,omitempty"`
}

// Admission records the admission webhooks of a write (see doc.go): the
// mutating webhooks that changed the object, in call order, and the audit
// annotations of admission, keyed as kube-apiserver keys them
// ("<webhook name>/<key>" for a webhook's own auditAnnotations,
// "mutation.webhook.admission.k8s.io/round_R_index_I" for each mutating
// call).
type Admission struct {
	MutatedBy   []string          `json:"mutatedBy,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Event is one committed change to one API object, as published on the log.
// The JSON form is the envelope documented in doc.go.
type Event struct {
	ID       string   `json:"id"`
	Revision Revision `json:"revision"`
	Type     Type     `json:"type"`

	Group     string `json:"group"`
	Version   string `json:"version"`
	Resource  string `json:"resource"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
	// NodeName is spec.nodeName for pods, empty otherwise; it is part of the
	// subject so a kubelet can filter on its own node.
	NodeName string `json:"nodeName,omitempty"`
	// Partition is the subject partition (see Partition), "" for Empty.
	Partition string `json:"partition,omitempty"`

	// Object is the full object after the change (its last state for a
	// delete), with metadata.resourceVersion set to Revision.
	Object json.RawMessage `json:"object"`

	Verb          string    `json:"verb,omitempty"`
	Actor         Actor     `json:"actor"`
	AuditID       string    `json:"auditID,omitempty"`
	CausationID   string    `json:"causationID,omitempty"`
	CorrelationID string    `json:"correlationID,omitempty"`
	SourceIP      string    `json:"sourceIP,omitempty"`
	Time          time.Time `json:"time"`
	// Admission is WriteMeta.Admission; omitted when empty.
	Admission *Admission `json:"admission,omitempty"`
}

// Stream and subject names. See doc.go for the scheme.
const (
	// Stream holds every change except Lease heartbeats.
	Stream = "CAIRN"
	// LeaseStream holds coordination.k8s.io Lease changes, latest per lease.
	LeaseStream = "CAIRN_LEASES"

	SubjectPrefix      = "cairn.ev"
	LeaseSubjectPrefix = "cairn.lease"

	// MetaKey is the etcd key every apiserver transaction also writes its
	// WriteMeta to, so the metadata carries the same revision as the change.
	MetaKey = "/cairn/txmeta"
	// RegistryPrefix is where API objects live in etcd.
	RegistryPrefix = "/registry/"

	// Request headers a writer sets to link its write to what caused it.
	HeaderCausationID   = "X-Cairn-Causation-Id"
	HeaderCorrelationID = "X-Cairn-Correlation-Id"
	// HeaderEventID is set on write responses: the id of the event the
	// write produced.
	HeaderEventID = "X-Cairn-Event-Id"

	// NATS message headers on every published event.
	MsgHeaderRevision = "Cairn-Revision"
	MsgHeaderType     = "Cairn-Type"
)

// Empty stands for an empty token (core group, cluster-scoped namespace, pod
// not yet bound) in a subject.
const Empty = "_"

// Token escapes a value for use as one subject token: dots (legal in
// Kubernetes names and groups) become '~', the empty string becomes "_".
func Token(s string) string {
	if s == "" {
		return Empty
	}
	return strings.ReplaceAll(s, ".", "~")
}

// Untoken reverses Token.
func Untoken(t string) string {
	if t == Empty {
		return ""
	}
	return strings.ReplaceAll(t, "~", ".")
}

// GroupToken is the subject token of an API group ("core" for the legacy
// group).
func GroupToken(group string) string {
	if group == "" {
		return "core"
	}
	return Token(group)
}

// IsLease reports whether a group/resource goes to the lease stream.
func IsLease(group, resource string) bool {
	return group == "coordination.k8s.io" && resource == "leases"
}

// Subject is the subject an event is published on:
//
//	cairn.ev.<group>.<resource>.<node>.<namespace>.<name>.<partition>
//
// (cairn.lease.… for leases).
func (e *Event) Subject() string {
	prefix := SubjectPrefix
	if IsLease(e.Group, e.Resource) {
		prefix = LeaseSubjectPrefix
	}
	return prefix + "." + GroupToken(e.Group) + "." + e.Resource + "." + Token(e.NodeName) + "." + Token(e.Namespace) + "." + Token(e.Name) + "." + Token(e.Partition)
}

// Partitions is the number of subject partitions.
const Partitions = 32

// KeyHash is the hash partitions are computed from (FNV-32a); the
// consumer runtime's sharder partitions keys with it too, so that a
// sharder with a divisor of Partitions as its partition count owns whole
// subject partitions.
func KeyHash(key string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return h.Sum32()
}

// Partition is the subject partition of an object in namespace whose
// controller owner (the ownerReference with controller: true) is named
// controller: KeyHash("<namespace>/<controller>") % Partitions, as a
// decimal token. An object without a controller has partition "" (token
// Empty). Every object a controller owns shares its partition, so a
// consumer that handles some controllers receives only their objects.
func Partition(namespace, controller string) string {
	if controller == "" {
		return ""
	}
	return strconv.Itoa(int(KeyHash(namespace+"/"+controller) % Partitions))
}

// SubjectKey is what a subject says of its event: every field of the
// envelope that subjects carry.
type SubjectKey struct {
	Group, Resource, NodeName, Namespace, Name, Partition string
}

// ParseSubject reverses Subject; ok is false for a subject outside the
// scheme. Subjects written before the partition token existed (seven
// tokens) parse with an empty Partition.
func ParseSubject(subject string) (k SubjectKey, ok bool) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix+".")
	if !ok {
		if rest, ok = strings.CutPrefix(subject, LeaseSubjectPrefix+"."); !ok {
			return SubjectKey{}, false
		}
	}
	var t [6]string
	for i := range 4 {
		if t[i], rest, ok = strings.Cut(rest, "."); !ok {
			return SubjectKey{}, false
		}
	}
	t[4], t[5], _ = strings.Cut(rest, ".")
	if strings.Contains(t[5], ".") {
		return SubjectKey{}, false
	}
	if t[0] != "core" {
		k.Group = Untoken(t[0])
	}
	k.Resource, k.NodeName, k.Namespace, k.Name, k.Partition = t[1], Untoken(t[2]), Untoken(t[3]), Untoken(t[4]), Untoken(t[5])
	return k, true
}

// Key is the subject's view of e.
func (e *Event) Key() SubjectKey {
	return SubjectKey{Group: e.Group, Resource: e.Resource, NodeName: e.NodeName, Namespace: e.Namespace, Name: e.Name, Partition: e.Partition}
}

// Filter builds a subject filter; empty arguments become wildcards.
// Filter("", "pods", "node-1", "", "") is what a kubelet subscribes to.
// group is the API group name ("" or "core" for the legacy group).
func Filter(group, resource, node, namespace, name string) string {
	return PartitionFilter(group, resource, node, namespace, name, "*")
}

// PartitionFilter is Filter restricted to one partition token: a number
// from Partition, Empty for objects without a controller, or "*".
func PartitionFilter(group, resource, node, namespace, name, partition string) string {
	wild := func(s string) string {
		if s == "" {
			return "*"
		}
		return Token(s)
	}
	g := "core"
	if group != "" && group != "core" {
		g = Token(group)
	}
	prefix := SubjectPrefix
	if IsLease(group, resource) {
		prefix = LeaseSubjectPrefix
	}
	return prefix + "." + g + "." + wild(resource) + "." + wild(node) + "." + wild(namespace) + "." + wild(name) + "." + partition
}
