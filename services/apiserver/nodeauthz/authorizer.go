package nodeauthz

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/rbac"
)

// LeaseNamespace is where nodes keep their heartbeat Leases.
const LeaseNamespace = "kube-node-lease"

// Authorizer is kube's Node authorizer (plugin/pkg/auth/authorizer/node):
// for a user system:node:<name> in system:nodes, Secrets, ConfigMaps and
// PersistentVolumeClaims are readable one by one and only when a pod bound
// to the node uses them, tokens may be requested only for the
// ServiceAccounts of such pods, Leases only of the node's own name in
// kube-node-lease, and everything else as NodeRules grant. It has no
// opinion on other users. NodeRestriction (admission) narrows the writes
// further to the node's own objects.
type Authorizer struct {
	Graph *Graph
	// Rules are the static rules of nodes; nil means NodeRules.
	Rules []rbacv1.PolicyRule
}

var _ apiserver.Authorizer = (*Authorizer)(nil)

// NodeName is the node of a user, if it is a node's.
func NodeName(u apiserver.User) (string, bool) {
	name, ok := strings.CutPrefix(u.User, apiserver.NodeUserPrefix)
	if !ok {
		return "", false
	}
	for _, g := range u.Groups {
		if g == apiserver.GroupNodes {
			return name, true
		}
	}
	return "", false
}

func verb(ok bool, v string, vs ...string) bool {
	for _, x := range vs {
		if v == x {
			return true
		}
	}
	return ok
}

// Authorize implements apiserver.Authorizer.
func (a *Authorizer) Authorize(_ context.Context, at apiserver.Attributes) (bool, string) {
	node, ok := NodeName(at.User)
	if !ok {
		return false, ""
	}
	if node == "" {
		return false, fmt.Sprintf("unknown node for user %q", at.User.User)
	}
	if at.Resource != "" && at.APIGroup == "" {
		switch at.Resource {
		case "secrets":
			return a.readThroughPods(node, kindSecret, at)
		case "configmaps":
			return a.readThroughPods(node, kindConfigMap, at)
		case "persistentvolumeclaims":
			if at.Subresource == "status" {
				return a.statusUpdate(node, kindPVC, at) // the kubelet finishes expansions
			}
			return a.readThroughPods(node, kindPVC, at)
		case "serviceaccounts":
			if at.Verb != "create" || at.Subresource != "token" {
				return false, "can only create tokens for individual service accounts"
			}
			return a.related(node, kindServiceAccount, at)
		}
	}
	if at.Resource == "leases" && at.APIGroup == "coordination.k8s.io" {
		if !verb(false, at.Verb, "get", "create", "update", "patch", "delete") {
			return false, "can only get, create, update, patch, or delete a node lease"
		}
		if at.Namespace != LeaseNamespace {
			return false, fmt.Sprintf("can only access leases in the %q system namespace", LeaseNamespace)
		}
		// A create names the Lease in its body: NodeRestriction checks it.
		if at.Verb != "create" && at.Name != node {
			return false, "can only access node lease with the same name as the requesting node"
		}
		return true, ""
	}
	rules := a.Rules
	if rules == nil {
		rules = NodeRules()
	}
	for i := range rules {
		if rbac.RuleAllows(at, &rules[i]) {
			return true, ""
		}
	}
	return false, ""
}

// readThroughPods is kube's authorizeReadNamespacedObject.
func (a *Authorizer) readThroughPods(node string, k kind, at apiserver.Attributes) (bool, string) {
	if !verb(false, at.Verb, "get", "list", "watch") {
		return false, "can only read resources of this type"
	}
	if at.Subresource != "" {
		return false, "cannot read subresource"
	}
	if at.Namespace == "" {
		return false, "can only read namespaced object of this type"
	}
	return a.related(node, k, at)
}

// statusUpdate is kube's authorizeStatusUpdate: the status of an object
// reached from node, updated or patched.
func (a *Authorizer) statusUpdate(node string, k kind, at apiserver.Attributes) (bool, string) {
	if !verb(false, at.Verb, "update", "patch") {
		return false, "can only get/update/patch this type"
	}
	return a.related(node, k, at)
}

// related is kube's authorize: the object is named and reached from node.
func (a *Authorizer) related(node string, k kind, at apiserver.Attributes) (bool, string) {
	if at.Name == "" {
		return false, "No Object name found"
	}
	if !a.Graph.reaches(node, k, at.Namespace, at.Name) {
		return false, fmt.Sprintf("no relationship found between node '%s' and this object", node)
	}
	return true, ""
}

// Union asks each authorizer in turn; the first that allows decides. A
// denial gives the reasons of all, joined as kube's union authorizer
// does.
type Union []apiserver.Authorizer

var _ apiserver.Authorizer = Union(nil)

// Authorize implements apiserver.Authorizer.
func (u Union) Authorize(ctx context.Context, at apiserver.Attributes) (bool, string) {
	var reasons []string
	for _, a := range u {
		ok, reason := a.Authorize(ctx, at)
		if ok {
			return true, ""
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	return false, strings.Join(reasons, ", ")
}

func rule(verbs []string, group string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{group}, Resources: resources}
}

// NodeRules are kube's bootstrappolicy.NodeRules for what cairn serves:
// what every node may do besides what the graph decides.
func NodeRules() []rbacv1.PolicyRule {
	read := []string{"get", "list", "watch"}
	return []rbacv1.PolicyRule{
		rule([]string{"create"}, "authentication.k8s.io", "tokenreviews"),
		rule([]string{"create"}, "authorization.k8s.io", "subjectaccessreviews", "localsubjectaccessreviews"),
		rule(read, "", "services"),
		rule([]string{"create", "get", "list", "watch"}, "", "nodes"),
		rule([]string{"update", "patch"}, "", "nodes/status"),
		rule([]string{"update", "patch"}, "", "nodes"),
		rule([]string{"create", "update", "patch"}, "", "events"),
		rule([]string{"create", "update", "patch"}, "events.k8s.io", "events"),
		rule(read, "", "pods"),
		rule([]string{"create", "delete"}, "", "pods"),
		rule([]string{"update", "patch"}, "", "pods/status"),
		rule([]string{"create"}, "", "pods/eviction"),
		rule([]string{"get"}, "", "persistentvolumes"),
		// CSI: the kubelet waits for attachments, registers its drivers in
		// its CSINode (NodeRestriction: its own) and reads their CSIDrivers.
		rule([]string{"get"}, "storage.k8s.io", "volumeattachments"),
		rule([]string{"get", "create", "update", "patch", "delete"}, "storage.k8s.io", "csinodes"),
		rule(read, "storage.k8s.io", "csidrivers"),
		rule([]string{"get"}, "", "endpoints"),
		// Client certificate rotation (and serving certificates).
		rule([]string{"create", "get", "list", "watch"}, "certificates.k8s.io", "certificatesigningrequests"),
		// cairn: the NATS URLs of the log, for nodes that joined.
		{Verbs: []string{"get"}, NonResourceURLs: []string{"/cairn/v1/endpoints"}},
	}
}

// RulesFor implements apiserver.RuleLister: like kube's, the Node
// authorizer cannot list a node's permissions (they depend on its pods),
// so for a node the list is incomplete; for anyone else it adds nothing.
func (a *Authorizer) RulesFor(u apiserver.User, _ string) authorizationv1.SubjectRulesReviewStatus {
	if _, ok := NodeName(u); ok {
		return authorizationv1.SubjectRulesReviewStatus{Incomplete: true, EvaluationError: "node authorizer does not support user rule resolution"}
	}
	return authorizationv1.SubjectRulesReviewStatus{}
}

// RulesFor implements apiserver.RuleLister: the rules of every member that
// lists them (SelfSubjectRulesReview, kubectl auth can-i --list).
func (u Union) RulesFor(user apiserver.User, namespace string) authorizationv1.SubjectRulesReviewStatus {
	var out authorizationv1.SubjectRulesReviewStatus
	var errs []string
	for _, a := range u {
		l, ok := a.(apiserver.RuleLister)
		if !ok {
			continue
		}
		st := l.RulesFor(user, namespace)
		out.ResourceRules = append(out.ResourceRules, st.ResourceRules...)
		out.NonResourceRules = append(out.NonResourceRules, st.NonResourceRules...)
		out.Incomplete = out.Incomplete || st.Incomplete
		if st.EvaluationError != "" {
			errs = append(errs, st.EvaluationError)
		}
	}
	out.EvaluationError = strings.Join(errs, ", ")
	return out
}

var (
	_ apiserver.RuleLister = (*Authorizer)(nil)
	_ apiserver.RuleLister = Union(nil)
)
