// Package nodeauthz is kube's Node authorizer and NodeRestriction
// admission plugin (plugin/pkg/auth/authorizer/node,
// plugin/pkg/admission/noderestriction) for what cairn serves.
//
// A kubelet authenticates as system:node:<name> in system:nodes. The
// Authorizer lets it read a Secret, ConfigMap or PersistentVolumeClaim by
// name only when a pod bound to its node uses it (a volume, a projected
// source, env or envFrom, an image pull secret), request tokens only for
// the ServiceAccounts of those pods, touch only its own Lease in
// kube-node-lease, and otherwise do what NodeRules (kube's static node
// rules) grant; it has no opinion on anyone else, and Union puts it before
// RBAC. Restriction then narrows writes to the node's own Node, mirror
// pods bound to it, the deletion, eviction and status of its own pods, and
// tokens bound to its own pods.
//
// The Graph it decides from is a cache of the pods (package objcache: one
// snapshot of etcd, then the log) indexed by node: no etcd read on the
// request path. It lags a write by the log's latency, so a kubelet that
// learns of a new pod may see one refusal before the graph has it, as with
// kube's informer-fed graph; the kubelet retries.
package nodeauthz
