// Package rbac is cairn's authorization: Kubernetes' RBAC authorizer
// (plugin/pkg/auth/authorizer/rbac) over in-memory caches of the four
// rbac.authorization.k8s.io/v1 kinds, kept current from the log, with
// kube's bootstrap policy, the ClusterRole aggregation controller and the
// escalation checks of kube's RBAC storage.
//
// # Deciding
//
// Authorizer.Authorize allows members of system:masters outright (kube's
// privileged-group authorizer, which the apiserver's own loopback client
// relies on), then walks the ClusterRoleBindings and the RoleBindings of
// the request's namespace that name the user (as a User, one of its
// Groups, or the ServiceAccount whose username it is), resolves each
// binding's role and allows on the first rule that covers the request
// (RuleAllows). Nothing on that path reads etcd: a Policy answers from
// memory. Caches is the Policy the apiserver uses: the four kinds from a
// snapshot of etcd at one revision, then the log through the apiserver's
// watch hub, with the bindings indexed by namespace. Like kube's informers
// they lag a write by the log's latency (milliseconds), so a client that
// has just created a binding may see one more refusal. A denial's reason
// names bindings whose role is missing, as kube's does.
//
// # Start-up
//
// Reconcile makes the cluster's policy contain BootstrapPolicy, as
// kube-apiserver's rbac/bootstrap-roles post-start hook and `kubectl auth
// reconcile` do: missing roles and bindings are created, missing rules,
// labels, annotations and subjects are added to existing ones, unless
// their rbac.authorization.kubernetes.io/autoupdate annotation is "false".
// Aggregator is the ClusterRole aggregation controller: a ClusterRole with
// an aggregationRule gets the rules of every ClusterRole its selectors
// match.
//
// # Writing RBAC objects
//
// Escalation is the admission plugin that refuses (403) a Role or
// ClusterRole granting more than its author holds unless they may
// `escalate` it, and a binding to a role whose rules they do not hold
// unless they may `bind` it, in kube's words.
package rbac
