// Package custom builds the schemas.Resources a CustomResourceDefinition
// defines: one per served version, whose objects are
// *unstructured.Unstructured, with kube's own strategy for them
// (k8s.io/apiextensions-apiserver's registry/customresource): structural
// schema validation (types, formats, enum, bounds, pattern, required,
// nullable, int-or-string, preserve-unknown-fields, embedded resources,
// list and map types), x-kubernetes-validations CEL rules with oldSelf
// transition rules, pruning of unknown fields and defaulting from the
// schema (pkg/apiserver/schema/pruning and defaulting), the status and
// scale subresources, additionalPrinterColumns tables, and the OpenAPI v2
// and v3 documents of the version (pkg/controller/openapi/builder), which
// also give server-side apply its schema.
//
// Build is pure: the same definition gives equal resources; a changed
// definition is rebuilt whole (kube tears a CRD's storage down and builds
// it again on every change too).
package custom
