// Package schemas describes the API surface cairn serves: which resources
// exist, their Go types (from k8s.io/api), and the strategy the apiserver
// applies to each of them. It is a port of what kube-apiserver's registry
// strategies do, kept close enough that kubectl and client-go cannot tell
// the difference.
//
// # Registry
//
// NewRegistry builds a Registry holding one Resource per served resource:
//
//	core/v1                 namespaces, pods, nodes, events, configmaps, secrets, serviceaccounts, services, endpoints,
//	                        persistentvolumes, persistentvolumeclaims
//	apps/v1                 controllerrevisions, daemonsets, deployments, replicasets, statefulsets
//	batch/v1                cronjobs, jobs
//	policy/v1               poddisruptionbudgets
//	storage.k8s.io/v1       csidrivers, csinodes, storageclasses, volumeattachments (storage.go)
//	scheduling.k8s.io/v1    priorityclasses
//	coordination.k8s.io/v1  leases
//	discovery.k8s.io/v1     endpointslices
//	apiextensions.k8s.io/v1 customresourcedefinitions (apiextensions.go: kube's own strategy)
//
// and, added and removed at run time by SetCustom (registry_custom.go),
// the kinds of CustomResourceDefinitions, which package schemas/custom
// builds (objects are *unstructured.Unstructured; Resource.Custom says
// what else the apiserver needs of them).
//
// Lookup finds a resource by group, version and plural (the URL form),
// ByKind by GroupVersionKind. All lists them in a stable order and Groups
// lists the group versions in the order discovery shows them. A Registry is
// safe for concurrent use; its built-in part never changes after
// NewRegistry returns, and there is no package-level state.
//
// # Strategy
//
// Each Resource carries the funcs the apiserver calls, in this order on a
// write:
//
//	create:         Default, PrepareForCreate, ValidateCreate
//	update:         Default, PrepareForUpdate, ValidateUpdate
//	status update:  Default, PrepareForStatusUpdate, Resource.ValidateStatus
//
// Default ports Kubernetes' SetObjectDefaults_<Kind> (pkg/apis/core/v1 and
// pkg/apis/apps/v1 defaults and their generated walkers). Secret's Default
// also folds stringData into data, which kube does while converting to its
// internal type.
//
// PrepareForCreate and PrepareForUpdate do what the kind's registry strategy
// does: clear status on create (pods start Pending with their QoS class,
// namespaces Active with the "kubernetes" finalizer), keep status from the
// old object on a main-resource update, and set metadata.generation to 1 on
// create and bump it when the spec changes (pods, deployments, replicasets,
// daemonsets, statefulsets, jobs, cronjobs, poddisruptionbudgets;
// deployments also when annotations change). Kinds kube does not track a
// generation for (configmaps, secrets, events, leases, priorityclasses,
// nodes, namespaces) keep generation 0, as in
// Kubernetes. A Job's create also generates its selector (its UID, which
// the apiserver sets before PrepareForCreate) and the job-name and
// controller-uid template labels, unless spec.manualSelector is set; a
// DaemonSet keeps the deprecated.daemonset.template.generation annotation,
// which counts template changes. The update funcs
// start by copying the old generation into the new object, as kube's
// rest.BeforeUpdate does, so a client cannot set it.
//
// ValidateCreate and ValidateUpdate return the field.ErrorList kube returns:
// same field paths, same error types, same detail messages, for the checks
// ported (see the list in the package README of the commit that added it).
// They run the kind's validation and then, as kube's BeforeCreate and
// BeforeUpdate do, the generic object-meta checks (path-segment names).
// ValidateUpdate expects the new object to carry a resourceVersion, which
// kube's store fills in for unconditional updates before validating.
//
// # Field selectors and tables
//
// Fields returns the attributes a field selector may use: metadata.name,
// metadata.namespace for namespaced kinds (cluster-scoped kinds only have
// metadata.name, as in kube) and each kind's own (spec.nodeName for pods,
// type for secrets, ...).
//
// Table renders kubectl's columns exactly as kube's printers do, always in
// wide form: the apiserver sends every column and kubectl hides those with
// Priority > 0 unless asked for -o wide. Ages are rendered relative to the
// Registry's clock (WithClock in tests).
package schemas
