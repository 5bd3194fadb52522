// Package openapi publishes the OpenAPI documents of the served kinds, the
// way kube-apiserver does, so that kubectl explain, kubectl's client-side
// validation and strategic-merge patching, and client-go's typed tooling
// work against cairn.
//
// The schemas come from reflection over the k8s.io/api Go types, not from
// a code generator: fields follow their json tags (inline, omitempty, "-"),
// descriptions come from each type's SwaggerDoc(), definitions are named
// as Kubernetes names them (io.k8s.api.core.v1.Pod), and the
// apimachinery types that describe themselves (Time, MicroTime, Duration,
// Quantity, IntOrString) keep their published types. Fields without
// omitempty (and not pointers) are required; patchStrategy and
// patchMergeKey struct tags become x-kubernetes-patch-strategy and
// x-kubernetes-patch-merge-key; the list and map types of
// server-side apply (x-kubernetes-list-type, x-kubernetes-list-map-keys,
// x-kubernetes-map-type) come from client-go's structured-merge-diff
// schema of the built-in types.
//
// # Endpoints
//
//   - /openapi/v2: Swagger 2.0 with every definition and path, as JSON or,
//     when Accept asks for application/com.github.proto-openapi.spec.v2@v1.0+protobuf,
//     as the gnostic protobuf kubectl parses.
//   - /openapi/v3: the index {"paths": {"api/v1": {"serverRelativeURL": ...}}}.
//   - /openapi/v3/api/v1, /openapi/v3/apis/<group>/<version>: one OpenAPI
//     3.0 document per group version, with the schemas its paths reach.
//     Operations carry x-kubernetes-action and
//     x-kubernetes-group-version-kind; kinds carry
//     x-kubernetes-group-version-kind; PATCH operations list the
//     fieldValidation parameter, which tells kubectl to leave validation to
//     the server.
//
// Documents are built once by Build (or Handler) and are immutable; the
// handler answers with ETags and honours If-None-Match.
package openapi
