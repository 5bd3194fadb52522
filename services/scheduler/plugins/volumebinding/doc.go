// Package volumebinding is the scheduler's VolumeBinding plugin, as
// kube-scheduler's: it places pods whose volumes are
// PersistentVolumeClaims (or ephemeral volumes, whose claims are named
// <pod>-<volume>) where those claims can be satisfied, and binds the
// claims that wait for their first consumer to the node it chose.
//
//   - PreFilter: every claim must exist and not be being deleted; a claim
//     not bound yet whose class binds Immediately makes the pod
//     unschedulable everywhere ("pod has unbound immediate
//     PersistentVolumeClaims"); a pod without claims skips the plugin.
//   - Filter: a bound claim's volume must exist and its nodeAffinity admit
//     the node ("node(s) had volume node affinity conflict"); every
//     WaitForFirstConsumer claim must find, on that node, a free static
//     volume (the smallest that fits, as the PV controller picks) or a
//     class that can provision there: a provisioner other than
//     kubernetes.io/no-provisioner, allowedTopologies that match the
//     node, and, for a CSI driver with topology, the node's CSINode
//     registering the driver ("node(s) didn't find available persistent
//     volumes to bind"). Rejections are UnschedulableAndUnresolvable.
//   - PreBind: the same decision for the chosen node is written: static
//     volumes get the claim's claimRef, claims to provision the
//     volume.kubernetes.io/selected-node annotation; then it waits until
//     the PV controller (and the provisioner) bound every claim. A claim
//     whose selected node the provisioner dropped, or a wait longer than
//     the bind timeout, fails the attempt and the pod is retried.
package volumebinding
