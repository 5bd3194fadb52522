// Package policystatus is the ValidatingAdmissionPolicy status
// controller, a port of kube's pkg/controller/validatingadmissionpolicystatus:
// a policy whose metadata.generation is newer than its
// status.observedGeneration is type checked by k8s.io/apiserver's own
// TypeChecker (admission/plugin/policy/validating), and the result is
// applied to the status subresource (server-side apply, field manager
// validatingadmissionpolicy-status-controller, forced, as kube's):
// status.observedGeneration and status.typeChecking.expressionWarnings,
// one warning per spec.validations[i].expression or messageExpression
// that does not compile against a matched kind, with kube's text
// ("apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field
// 'replicaz' ..."). A policy whose expressions all check gets an empty
// typeChecking. As kube's controller, it writes no conditions, and type
// checking never changes what the policy does: a kind whose schema is not
// found is skipped, and expressions stay evaluated untyped.
//
// The kinds are those of the policy's matchConstraints.resourceRules
// (no wildcards, no subresources, at most 10), mapped by a RESTMapper
// over the apiserver's discovery (reset once per policy on a miss, so a
// new CRD is found); their schemas come from the apiserver's
// /openapi/v3 documents (resolver.ClientDiscoveryResolver, kube's
// fallback resolver), which cairn builds from the same types it serves,
// custom resources included.
//
// It runs in the controller-manager, as kube's runs in
// kube-controller-manager, not in the apiserver: it only reads the log
// and writes through the API, like every other status writer. Policies
// are cluster-scoped; their names are keys of the controller-manager's
// shard, so one replica checks each policy.
package policystatus
