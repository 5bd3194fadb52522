package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/pki"
)

// The bootstrap policy: the ClusterRoles and ClusterRoleBindings of kube's
// plugin/pkg/auth/authorizer/rbac/bootstrappolicy that concern what cairn
// serves and runs. Where cairn differs it says so:
//
//   - system:kube-controller-manager also may do anything to API objects:
//     cairn's controllers run under the controller manager's own identity
//     (kube gives each controller a service account and a
//     system:controller:* role; cairn has no service accounts yet).
//   - system:node is bound to the group system:nodes, and the role grants
//     what cairn's kubelet needs (read everything; write its Node, Events,
//     Leases and pods' status; create and delete pods). A control plane
//     with the Node authorizer (package nodeauthz, as cairn up runs it)
//     leaves the binding without subjects, as kube does.
//   - system:kube-scheduler also reads PriorityClasses, which cairn's
//     scheduler resolves itself.

// Labels and annotations of the bootstrap policy.
const (
	// AutoUpdateAnnotation set to "false" on a bootstrap object keeps
	// Reconcile from changing it.
	AutoUpdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"
	// BootstrapLabel marks the bootstrap objects.
	BootstrapLabel      = "kubernetes.io/bootstrapping"
	aggregateToAdmin    = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit     = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView     = "rbac.authorization.k8s.io/aggregate-to-view"
	groupMonitoring     = "system:monitoring"
	legacyGroup         = ""
	appsGroup           = "apps"
	authenticationGroup = "authentication.k8s.io"
	authorizationGroup  = "authorization.k8s.io"
	batchGroup          = "batch"
	coordinationGroup   = "coordination.k8s.io"
	discoveryGroup      = "discovery.k8s.io"
	eventsGroup         = "events.k8s.io"
	networkingGroup     = "networking.k8s.io"
	policyGroup         = "policy"
	rbacGroup           = rbacv1.GroupName
	schedulingGroup     = "scheduling.k8s.io"
	storageGroup        = "storage.k8s.io"
	certificatesGroup   = "certificates.k8s.io"
	autoscalingGroup    = "autoscaling"
)

var (
	read      = []string{"get", "list", "watch"}
	write     = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite = append(append([]string{}, read...), write...)
	all       = []string{"*"}
)

func rule(verbs []string, groups []string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources}
}

func groups(g ...string) []string { return g }

func urls(verbs []string, u ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: u}
}

func verbs(v ...string) []string { return v }

// groupBootstrappers is the group of every bootstrap token (jointoken).
const groupBootstrappers = "system:bootstrappers"

func signerRule(verb, signer string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs(verb), APIGroups: groups(certificatesGroup), Resources: []string{"signers"}, ResourceNames: []string{signer}}
}

func clusterRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	l := map[string]string{BootstrapLabel: "rbac-defaults"}
	for k, v := range labels {
		l[k] = v
	}
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{AutoUpdateAnnotation: "true"}},
		Rules:      rules,
	}
}

func aggregated(name string, labels map[string]string, selectLabel string) *rbacv1.ClusterRole {
	r := clusterRole(name, labels)
	r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchLabels: map[string]string{selectLabel: "true"}}}}
	return r
}

func binding(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{BootstrapLabel: "rbac-defaults"},
			Annotations: map[string]string{AutoUpdateAnnotation: "true"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "ClusterRole", Name: role},
		Subjects: subjects,
	}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacGroup, Name: name}
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacGroup, Name: name}
}

// healthURLs are what system:public-info-viewer may read.
var healthURLs = []string{"/livez", "/readyz", "/healthz", "/version", "/version/"}

// CACertsURL is where the cluster CA certificate is served to anyone
// (k3s' /cacerts), for nodes that join to check against their token.
const CACertsURL = "/cacerts"

// JoinEndpointsURL is where nodes read the NATS URLs of the log.
const JoinEndpointsURL = "/cairn/v1/endpoints"

// ServerJoinURL is where a server that joins (cairn up --join) reads the
// cluster's PKI and servers; ServerJoinGroup, the extra group of the
// server token of cairn up --cluster-init, may read it.
const (
	ServerJoinURL   = "/cairn/v1/servers/join"
	ServerJoinGroup = "system:bootstrappers:cairn:servers"
)

// The signers of kube's built-in CSR signers, and the subresources on
// which the CSR approver checks who may ask for what (kube's
// SubjectAccessReview-equivalent checks in pkg/controller/certificates/approver).
const (
	SelfNodeClientSubresource = "selfnodeclient"
	NodeClientSubresource     = "nodeclient"
	// KubeProxyClientSubresource is cairn's: a bootstrapper that may
	// create it gets a client certificate for system:kube-proxy approved
	// (k3s gives agents the proxy's certificate for the node token).
	KubeProxyClientSubresource = "kubeproxyclient"
)

// BootstrapClusterRoles returns kube's bootstrap ClusterRoles, fresh copies.
func BootstrapClusterRoles() []*rbacv1.ClusterRole {
	events := rule(verbs("create", "update", "patch"), groups(legacyGroup, eventsGroup), "events")
	return []*rbacv1.ClusterRole{
		clusterRole("cluster-admin", nil, rule(all, all, "*"), urls(all, "*")),
		clusterRole("system:discovery", nil, urls(verbs("get"), append(append([]string{}, healthURLs...),
			"/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*")...)),
		clusterRole("system:monitoring", nil, urls(verbs("get"), "/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz",
			"/livez/*", "/readyz/*", "/healthz/*")),
		clusterRole("system:basic-user", nil,
			rule(verbs("create"), groups(authorizationGroup), "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			rule(verbs("create"), groups(authenticationGroup), "selfsubjectreviews")),
		clusterRole("system:public-info-viewer", nil, urls(verbs("get"), append(append([]string{}, healthURLs...), CACertsURL)...)),
		clusterRole("cairn:server-join", nil, urls(verbs("get"), ServerJoinURL)),
		clusterRole("system:node-bootstrapper", nil,
			rule(verbs("create", "get", "list", "watch"), groups(certificatesGroup), "certificatesigningrequests")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient", nil,
			rule(verbs("create"), groups(certificatesGroup), "certificatesigningrequests/"+NodeClientSubresource)),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", nil,
			rule(verbs("create"), groups(certificatesGroup), "certificatesigningrequests/"+SelfNodeClientSubresource)),
		clusterRole("cairn:certificatesigningrequests:kubeproxyclient", nil,
			rule(verbs("create"), groups(certificatesGroup), "certificatesigningrequests/"+KubeProxyClientSubresource)),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-approver", nil,
			signerRule("approve", "kubernetes.io/kube-apiserver-client")),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-kubelet-approver", nil,
			signerRule("approve", "kubernetes.io/kube-apiserver-client-kubelet")),
		clusterRole("system:certificates.k8s.io:kubelet-serving-approver", nil,
			signerRule("approve", "kubernetes.io/kubelet-serving")),
		aggregated("admin", nil, aggregateToAdmin),
		aggregated("edit", map[string]string{aggregateToAdmin: "true"}, aggregateToEdit),
		aggregated("view", map[string]string{aggregateToEdit: "true"}, aggregateToView),
		clusterRole("system:aggregate-to-admin", map[string]string{aggregateToAdmin: "true"},
			rule(verbs("create"), groups(authorizationGroup), "localsubjectaccessreviews"),
			rule(readWrite, groups(rbacGroup), "roles", "rolebindings")),
		clusterRole("system:aggregate-to-edit", map[string]string{aggregateToEdit: "true"},
			rule(read, groups(legacyGroup), "pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
			rule(verbs("impersonate"), groups(legacyGroup), "serviceaccounts"),
			rule(write, groups(legacyGroup), "pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
			rule(verbs("create"), groups(legacyGroup), "pods/eviction"),
			rule(write, groups(legacyGroup), "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
				"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events"),
			rule(verbs("create"), groups(legacyGroup), "serviceaccounts/token"),
			rule(write, groups(appsGroup), "statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
				"deployments/rollback", "replicasets", "replicasets/scale"),
			rule(write, groups(autoscalingGroup), "horizontalpodautoscalers"),
			rule(write, groups(batchGroup), "jobs", "cronjobs"),
			rule(write, groups(policyGroup), "poddisruptionbudgets"),
			rule(write, groups(networkingGroup), "networkpolicies", "ingresses"),
			rule(readWrite, groups(coordinationGroup), "leases")),
		clusterRole("system:aggregate-to-view", map[string]string{aggregateToView: "true"},
			rule(read, groups(legacyGroup), "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
				"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
			rule(read, groups(legacyGroup), "limitranges", "resourcequotas", "bindings", "events", "pods/status",
				"resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log"),
			rule(read, groups(legacyGroup), "namespaces"),
			rule(read, groups(discoveryGroup), "endpointslices"),
			rule(read, groups(appsGroup), "controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
				"daemonsets", "daemonsets/status", "deployments", "deployments/status", "deployments/scale",
				"replicasets", "replicasets/status", "replicasets/scale"),
			rule(read, groups(autoscalingGroup), "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
			rule(read, groups(batchGroup), "jobs", "cronjobs", "cronjobs/status", "jobs/status"),
			rule(read, groups(policyGroup), "poddisruptionbudgets", "poddisruptionbudgets/status"),
			rule(read, groups(networkingGroup), "networkpolicies", "ingresses", "ingresses/status")),
		clusterRole("system:auth-delegator", nil,
			rule(verbs("create"), groups(authenticationGroup), "tokenreviews"),
			rule(verbs("create"), groups(authorizationGroup), "subjectaccessreviews")),
		clusterRole("system:kube-controller-manager", nil,
			events,
			rule(verbs("create"), groups(coordinationGroup), "leases"),
			rule(verbs("get", "update"), groups(coordinationGroup), "leases"),
			rule(verbs("create"), groups(authenticationGroup), "tokenreviews"),
			rule(verbs("create"), groups(authorizationGroup), "subjectaccessreviews"),
			rule(verbs("list", "watch"), all, "*"),
			// cairn: the controllers act as the controller manager.
			rule(all, all, "*")),
		clusterRole("system:kube-scheduler", nil,
			events,
			rule(verbs("create"), groups(coordinationGroup), "leases"),
			rbacv1.PolicyRule{Verbs: verbs("get", "update"), APIGroups: groups(coordinationGroup), Resources: []string{"leases"},
				ResourceNames: []string{"kube-scheduler"}},
			rule(read, groups(legacyGroup), "nodes"),
			rule(verbs("get", "list", "watch", "delete"), groups(legacyGroup), "pods"),
			rule(verbs("create"), groups(legacyGroup), "pods/binding", "bindings"),
			rule(verbs("patch", "update"), groups(legacyGroup), "pods/status"),
			rule(read, groups(legacyGroup), "services", "replicationcontrollers"),
			rule(read, groups(appsGroup), "replicasets"),
			rule(read, groups(appsGroup), "statefulsets"),
			rule(read, groups(policyGroup), "poddisruptionbudgets"),
			rule(read, groups(legacyGroup), "persistentvolumeclaims", "persistentvolumes"),
			// kube's system:volume-scheduler, bound to the scheduler: the
			// VolumeBinding plugin binds volumes and selects nodes.
			rule(verbs("patch", "update"), groups(legacyGroup), "persistentvolumeclaims", "persistentvolumes"),
			rule(read, groups(storageGroup), "storageclasses"),
			rule(verbs("create"), groups(authenticationGroup), "tokenreviews"),
			rule(verbs("create"), groups(authorizationGroup), "subjectaccessreviews"),
			rule(read, groups(storageGroup), "csinodes"),
			rule(read, groups(legacyGroup), "namespaces"),
			rule(read, groups(storageGroup), "csidrivers", "csistoragecapacities"),
			// cairn: the scheduler resolves pod priorities itself.
			rule(read, groups(schedulingGroup), "priorityclasses")),
		clusterRole("system:node", nil,
			rule(read, all, "*"),
			rule(verbs("create", "get", "list", "watch"), groups(certificatesGroup), "certificatesigningrequests"),
			urls(verbs("get"), JoinEndpointsURL),
			rule(all, all, "nodes", "nodes/status", "events", "leases", "pods/status"),
			rule(verbs("create", "delete"), groups(legacyGroup), "pods", "pods/eviction"),
			rule(verbs("create"), groups(legacyGroup), "serviceaccounts/token"),
			rule(verbs("create"), groups(authenticationGroup), "tokenreviews"),
			rule(verbs("create"), groups(authorizationGroup), "subjectaccessreviews", "localsubjectaccessreviews")),
		clusterRole("system:node-proxier", nil,
			rule(verbs("list", "watch"), groups(legacyGroup), "services", "endpoints"),
			rule(verbs("get", "list", "watch"), groups(legacyGroup), "nodes"),
			events,
			rule(verbs("list", "watch"), groups(discoveryGroup), "endpointslices")),
		clusterRole("system:service-account-issuer-discovery", nil,
			urls(verbs("get"), "/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/")),
		// Full access to the kubelets' API; kubeadm binds it to the
		// apiserver's kubelet client.
		clusterRole("system:kubelet-api-admin", nil,
			rule(verbs("get", "list", "watch"), groups(legacyGroup), "nodes"),
			rule(verbs("proxy"), groups(legacyGroup), "nodes"),
			rule(all, groups(legacyGroup), "nodes/proxy", "nodes/metrics", "nodes/spec", "nodes/stats", "nodes/log")),
		clusterRole("system:kube-dns", nil, rule(verbs("list", "watch"), groups(legacyGroup), "endpoints", "services")),
	}
}

// BootstrapClusterRoleBindings returns kube's bootstrap ClusterRoleBindings.
func BootstrapClusterRoleBindings() []*rbacv1.ClusterRoleBinding {
	return []*rbacv1.ClusterRoleBinding{
		binding("cluster-admin", "cluster-admin", group(apiserver.GroupMasters)),
		binding("system:monitoring", "system:monitoring", group(groupMonitoring)),
		binding("system:discovery", "system:discovery", group(apiserver.GroupAuthenticated)),
		binding("system:basic-user", "system:basic-user", group(apiserver.GroupAuthenticated)),
		binding("system:public-info-viewer", "system:public-info-viewer", group(apiserver.GroupAuthenticated), group(apiserver.GroupUnauthenticated)),
		binding("system:node-proxier", "system:node-proxier", user(apiserver.UserKubeProxy)),
		binding("system:kube-controller-manager", "system:kube-controller-manager", user(apiserver.UserControllers)),
		binding("system:kube-dns", "system:kube-dns", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "kube-dns"}),
		binding("kube-apiserver-kubelet-client", "system:kubelet-api-admin", user(pki.KubeletClientUser)),
		binding("system:kube-scheduler", "system:kube-scheduler", user(apiserver.UserScheduler)),
		binding("system:service-account-issuer-discovery", "system:service-account-issuer-discovery", group("system:serviceaccounts")),
		// cairn: no Node authorizer yet, so the nodes' group is bound.
		binding("system:node", "system:node", group(apiserver.GroupNodes)),
		// cairn: hollow kubelets (simulated nodes, many per credential)
		// get the nodes' role without the Node authorizer's limits.
		binding("cairn:hollow-nodes", "system:node", group(apiserver.GroupHollowNodes)),
		// Kubelet TLS bootstrapping, as kubeadm binds it (kubeadm binds its
		// default token's group; cairn binds every bootstrap token's):
		// bootstrappers may create CSRs and get node client certificates
		// approved, and nodes their renewals.
		binding("cairn:kubelet-bootstrap", "system:node-bootstrapper", group(groupBootstrappers)),
		binding("cairn:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", group(groupBootstrappers)),
		binding("cairn:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
			group(apiserver.GroupNodes), group(apiserver.GroupHollowNodes)),
		binding("cairn:kube-proxy-autoapprove-bootstrap", "cairn:certificatesigningrequests:kubeproxyclient", group(groupBootstrappers)),
		binding("cairn:server-join", "cairn:server-join", group(ServerJoinGroup)),
	}
}
