// Package webhook calls admission webhooks as kube-apiserver's
// MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins do,
// built from k8s.io/apiserver's own pieces: its webhook accessors and
// REST client manager, its rule, namespace and object selector matchers,
// its CEL matchConditions, its AdmissionReview request building and
// response verification, and its error types, so that requests, matching
// and messages are kube's.
//
// # Where the configurations come from
//
// A Dispatcher keeps MutatingWebhookConfigurations,
// ValidatingWebhookConfigurations, Namespaces (for namespaceSelector),
// Services and EndpointSlices (for service references) in memory: a
// snapshot from etcd at one revision, then the log's changes through the
// apiserver's watch hub, as the RBAC caches do. The request path reads
// only these caches; the one exception is kube's: a namespace the cache
// does not hold yet is read once from etcd. A configuration written to
// the apiserver takes effect when its event reaches the cache (Loaded).
//
// # Order and errors
//
// Mutating webhooks run one after another, configurations by name and
// webhooks in their order, each on what the previous left (JSONPatch
// responses, applied and re-defaulted); reinvocationPolicy IfNeeded
// reruns the built-in mutation and the webhooks that asked for it once
// if a later webhook changed the object. Validating webhooks run in
// parallel. A webhook that refuses stops the write with its status code
// and `admission webhook "NAME" denied the request: MESSAGE`; one that
// cannot be called (down, too slow for timeoutSeconds, an answer that is
// not an AdmissionReview or whose uid does not match, a patch that cannot
// be decoded) stops it under failurePolicy Fail with `Internal error
// occurred: failed calling webhook "NAME": ...` and is skipped under
// Ignore. A dry run is refused by a webhook whose sideEffects are not
// None or NoneOnDryRun. Writes of the webhook configurations themselves
// are never sent to webhooks.
//
// # How a webhook is reached
//
// A url is dialed as it is (HTTPS, trusting caBundle). A service
// reference is resolved to a ready endpoint of the Service port (an
// EndpointSlice endpoint, chosen at random, as kube-apiserver's endpoint
// routing does), and the pod address is dialed from inside the network
// namespace of the endpoint's node (Config.NodeNetNS, package netns),
// with the TLS server name <service>.<namespace>.svc. A pod address is
// never dialed from the apiserver's own namespace: an endpoint on a node
// whose namespace the apiserver does not know cannot be called, and the
// webhook's failurePolicy decides. No HTTP proxy is ever used.
//
// # What is recorded
//
// A Record collects what the webhooks did to one request: warnings (sent
// to the client as Warning headers), the mutating webhooks that changed
// the object, and the audit annotations (kube's keys). The apiserver puts
// the last two in the event of the write (events.WriteMeta.Admission).
package webhook
