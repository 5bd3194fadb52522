// Package apiserver is cairn's Kubernetes-compatible API server. A request
// goes through TLS, the request deadline (timeout.go: kube's
// --request-timeout and ?timeout=, answered 504 Timeout; not for watches,
// proxy, log, exec, attach, portforward), authentication (client
// certificates or bearer tokens, auth.go), request parsing (requestinfo.go), impersonation
// (impersonate.go), authorization (Config.Authorizer; MastersAuthorizer
// without one: the control plane gives it the RBAC authorizer of package
// rbac), then the verb's handler:
// decoding (JSON, YAML, protobuf), defaulting, admission, validation, and
// one etcd transaction per write that carries the object and its
// events.WriteMeta (storage), from which the publisher builds the log.
// Reads come from etcd; watches come from the log (services/apiserver/watchhub).
//
// Admission (admission.go) is kube's built-in plugins that cairn has, then
// Config.Admission. DefaultTolerationSeconds, on pod creates and updates,
// makes every pod tolerate the node.kubernetes.io/not-ready and
// node.kubernetes.io/unreachable NoExecute taints for 300 s
// (Config.NotReadyTolerationSeconds, Config.UnreachableTolerationSeconds)
// unless it already tolerates them; NamespaceLifecycle refuses creates in a
// missing or terminating namespace. Both run for dry runs too. Admission
// webhooks (Config.Webhooks, package webhook, webhooks.go) run as
// kube-apiserver's webhook plugins do: the mutating ones after the
// built-in mutation, the validating ones after validation; what they did
// goes into the write's event and their warnings into Warning headers.
//
// Writes: create, update, patch (JSON patch, merge patch, strategic merge
// patch and server-side apply, apply.go), delete with preconditions,
// grace periods, finalizers and propagation, deletecollection, and the
// subresources status, scale, binding (checked against the node's room in
// the same transaction, binding.go), finalize, log and exec (proxied to the
// kubelet). Errors are Kubernetes Status objects with kube's codes and
// causes, and a refused write leaves nothing in etcd or on the log.
//
// Custom resources (the kinds of CustomResourceDefinitions, which package
// crds makes the registry serve) take the same path as Unstructured
// objects (crd.go): stored in the definition's storage version and
// converted on the way in and out, a Warning header for deprecated
// versions, no creates while the definition terminates, no strategic
// merge patch, server-side apply with the schema of the definition.
// Loopback is the in-process transport the CRD controllers write through.
package apiserver
