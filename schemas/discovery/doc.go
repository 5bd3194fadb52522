// Package discovery serves the Kubernetes discovery documents of the
// served resources, so that kubectl and client-go find them:
//
//   - /api: metav1.APIVersions (the core group's versions);
//   - /apis: metav1.APIGroupList; /apis/<group>: metav1.APIGroup;
//   - /api/<version>, /apis/<group>/<version>: metav1.APIResourceList,
//     with each resource's names, scope, kind, verbs, short names and
//     categories, and one entry per subresource ("pods/status" with get,
//     patch and update; "pods/binding" with create; "deployments/scale" of
//     kind autoscaling/v1 Scale);
//   - aggregated discovery: when the Accept header asks for
//     application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList
//     (or v=v2beta1, which clients up to 1.32 also offer), /api and /apis
//     answer with an apidiscovery.k8s.io APIGroupDiscoveryList, the core
//     group at /api and the others at /apis, and a Content-Type naming that
//     type: client-go decides between the formats by the Content-Type.
//
// Accept entries are tried in the client's order; anything that is not an
// aggregated type gets the JSON documents. Groups are ordered core first,
// then by name; a group's versions most preferred first (v1 before
// v1beta1). Responses carry an ETag and honour If-None-Match.
package discovery
