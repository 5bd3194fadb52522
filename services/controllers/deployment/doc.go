// Package deployment is the Deployment controller, a port of
// kube-controller-manager's (pkg/controller/deployment). It keeps, for every
// Deployment, one ReplicaSet per pod-template revision and moves pods from
// the old ones to the new one with the deployment's strategy. Pods
// themselves are the ReplicaSet controller's business: this controller
// only sizes ReplicaSets and reads their status (replicas, readyReplicas,
// availableReplicas).
//
// # ReplicaSets and revisions
//
// The new ReplicaSet of a deployment is the one whose template equals the
// deployment's, ignoring the pod-template-hash label. When there is none, it
// is created as <deployment>-<hash>, where hash is ComputeHash of the
// template and status.collisionCount (kube's fnv32a over the spew dump,
// rendered with rand.SafeEncodeString), and the hash is added to its labels,
// selector and pod template. Its deployment.kubernetes.io/revision is one
// more than the highest of the old ones and is copied to the deployment.
// A rollback (kubectl rollout undo patches the deployment's template with an
// old ReplicaSet's) makes that old ReplicaSet the new one again: it gets the
// next revision and its former one goes to revision-history. Every resize
// records desired-replicas (spec.replicas) and max-replicas (spec.replicas
// + maxSurge) on the ReplicaSet; a desired-replicas that differs from the
// deployment's spec tells a scaling event from a rollout. Old ReplicaSets
// at zero beyond revisionHistoryLimit are deleted, oldest revision first.
//
// # Reconcile
//
// In order of priority, as kube: a deployment being deleted only gets its
// status updated; a paused one, or one whose replicas changed, is scaled
// (in proportion over its active ReplicaSets in mid-rollout), and a
// template change while paused makes no new ReplicaSet; otherwise it is
// rolled out:
//
//   - RollingUpdate: scale the new ReplicaSet up while the total stays
//     within spec.replicas + maxSurge, scale old ones down (unhealthy
//     replicas first) while spec.replicas - maxUnavailable stay available.
//   - Recreate: scale every old ReplicaSet to zero, wait until no old pod
//     is left, then scale the new one to spec.replicas.
//
// Availability (ready for minReadySeconds) comes from the ReplicaSets'
// status. Rolling decisions count max(spec, status.replicas) pods and
// min(spec, status.availableReplicas) available pods per ReplicaSet: kube
// counts spec replicas and status, so for a moment after an old ReplicaSet
// is scaled down its pods that are still there are not counted, and its
// stale available count can be spent twice. That narrows the moments with
// more pods than spec.replicas + maxSurge but does not close them: a
// ReplicaSet's status.replicas itself lags its controller's pod creates
// (it is written from a pod cache that has not seen the last create yet),
// so a scale-down can still count one pod fewer than the ReplicaSet has
// (the chaos test, package services/cairn/chaostest, sees 4 pods for 2
// replicas and maxSurge 1 in every run). The bound kube keeps, on the
// ReplicaSets' specs, holds at every moment: a round waits until the
// replica set cache shows this replica's own last write to the
// deployment's ReplicaSets (Reconcile), so it never counts a size it has
// itself changed since (TestStaleReplicaSetCache).
//
// # Status
//
// Status sums the ReplicaSets' status (replicas, updatedReplicas of the new
// one, readyReplicas, availableReplicas, unavailableReplicas) with
// observedGeneration, and the conditions Available (MinimumReplicasAvailable
// when spec.replicas - maxUnavailable are available) and Progressing:
// NewReplicaSetCreated / FoundNewReplicaSet, ReplicaSetUpdated on progress,
// NewReplicaSetAvailable when complete (what kubectl rollout status waits
// for), ProgressDeadlineExceeded after progressDeadlineSeconds without
// progress (the controller requeues itself for that check), and
// DeploymentPaused / DeploymentResumed. ReplicaFailure conditions of the
// ReplicaSets are copied.
//
// # Ownership
//
// ReplicaSets are claimed as kube's ControllerRefManager does: orphans that
// match the selector are adopted (after a live read of the deployment),
// owned ones that no longer match are released. Every write carries the
// cause of the event that queued the deployment.
//
// # Events
//
// As kube's (source deployment-controller), on the Deployment, through an
// eventrecord.Recorder with a rate-limited client of its own: Normal
// ScalingReplicaSet on every change of a ReplicaSet's size ("Scaled up
// replica set web-5d4f from 0 to 3", "Scaled down replica set ... from 3 to
// 2"), Warning ReplicaSetCreateError when the new ReplicaSet cannot be
// created, Warning SelectingAll for a selector that selects every pod.
// Each Event's write carries the cause of the sync that recorded it.
//
// # Not done
//
// The deprecated spec.rollbackTo (extensions/v1beta1) does not exist in apps/v1 and is not
// supported; kube 1.33's terminating-replicas accounting and pod replacement
// policy are not ported (the bounds above cover the same ground).
package deployment
