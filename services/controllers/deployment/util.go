package deployment

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/dump"
)

// Annotations the controller reads and writes, as kube names them.
const (
	// RevisionAnnotation is the rollout sequence number of a replica set,
	// copied to its deployment.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists the earlier revisions a replica set
	// served (it gets a new revision when a rollback reuses it).
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation is the deployment's spec.replicas when the
	// replica set was last scaled: it tells scaling events from rollouts.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation is spec.replicas + maxSurge when the replica set
	// was last scaled, the base of proportional scaling.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"

	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
	rollbackToAnnotation  = "deprecated.deployment.rollback.to"

	// maxRevHistoryLengthInChars bounds the revision-history annotation.
	maxRevHistoryLengthInChars = 2000
)

// Condition reasons, as kube's deployment controller sets them (kubectl
// rollout status looks for NewReplicaSetAvailable and
// ProgressDeadlineExceeded).
const (
	ReasonReplicaSetUpdated  = "ReplicaSetUpdated"
	ReasonFailedRSCreate     = "ReplicaSetCreateError"
	ReasonNewReplicaSet      = "NewReplicaSetCreated"
	ReasonFoundNewRS         = "FoundNewReplicaSet"
	ReasonNewRSAvailable     = "NewReplicaSetAvailable"
	ReasonTimedOut           = "ProgressDeadlineExceeded"
	ReasonPaused             = "DeploymentPaused"
	ReasonResumed            = "DeploymentResumed"
	ReasonMinimumAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumUnavailable = "MinimumReplicasUnavailable"
)

// ReasonScalingReplicaSet is the reason of the Event recorded on every
// change of a replica set's size ("Scaled up replica set web-5d4f from 0
// to 3"), as kube's; ReasonFailedRSCreate is also an Event's.
const ReasonScalingReplicaSet = "ScalingReplicaSet"

var annotationsToSkip = map[string]bool{
	lastAppliedAnnotation:     true,
	RevisionAnnotation:        true,
	RevisionHistoryAnnotation: true,
	DesiredReplicasAnnotation: true,
	MaxReplicasAnnotation:     true,
	rollbackToAnnotation:      true,
}

// ComputeHash is kube's controller.ComputeHash: fnv32a over the spew dump
// of the template, plus the collision count, rendered with
// rand.SafeEncodeString. The same template gives the same pod-template-hash
// as kube-controller-manager built on the same k8s.io/api types.
func ComputeHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// equalIgnoreHash compares two pod templates, ignoring the
// pod-template-hash label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return apiequality.Semantic.DeepEqual(a, b)
}

// byCreation sorts replica sets oldest first, then by name.
type byCreation []*appsv1.ReplicaSet

func (o byCreation) Len() int      { return len(o) }
func (o byCreation) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o byCreation) Less(i, j int) bool {
	if o[i].CreationTimestamp.Equal(&o[j].CreationTimestamp) {
		return o[i].Name < o[j].Name
	}
	return o[i].CreationTimestamp.Before(&o[j].CreationTimestamp)
}

// bySizeNewer sorts larger first, then newer first (scaling up).
type bySizeNewer []*appsv1.ReplicaSet

func (o bySizeNewer) Len() int      { return len(o) }
func (o bySizeNewer) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o bySizeNewer) Less(i, j int) bool {
	if *o[i].Spec.Replicas == *o[j].Spec.Replicas {
		return byCreation(o).Less(j, i)
	}
	return *o[i].Spec.Replicas > *o[j].Spec.Replicas
}

// bySizeOlder sorts larger first, then older first (scaling down).
type bySizeOlder []*appsv1.ReplicaSet

func (o bySizeOlder) Len() int      { return len(o) }
func (o bySizeOlder) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o bySizeOlder) Less(i, j int) bool {
	if *o[i].Spec.Replicas == *o[j].Spec.Replicas {
		return byCreation(o).Less(i, j)
	}
	return *o[i].Spec.Replicas > *o[j].Spec.Replicas
}

// byRevision sorts replica sets by revision, oldest first.
type byRevision []*appsv1.ReplicaSet

func (o byRevision) Len() int      { return len(o) }
func (o byRevision) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o byRevision) Less(i, j int) bool {
	ri, rj := revision(o[i]), revision(o[j])
	if ri == rj {
		return byCreation(o).Less(i, j)
	}
	return ri < rj
}

// findNewReplicaSet is the oldest replica set whose template is the
// deployment's (ignoring the hash label), or nil.
func findNewReplicaSet(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sort.Sort(byCreation(rsList))
	for _, rs := range rsList {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// findOldReplicaSets returns the old replica sets with replicas and all
// old replica sets.
func findOldReplicaSets(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (withReplicas, all []*appsv1.ReplicaSet) {
	newRS := findNewReplicaSet(d, rsList)
	for _, rs := range rsList {
		if newRS != nil && rs.UID == newRS.UID {
			continue
		}
		all = append(all, rs)
		if *rs.Spec.Replicas != 0 {
			withReplicas = append(withReplicas, rs)
		}
	}
	return withReplicas, all
}

// filterActive keeps the non-nil replica sets with spec.replicas > 0.
func filterActive(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && *rs.Spec.Replicas > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// findActiveOrLatest returns the only active replica set, or the newest
// one when none is active; nil when several are active.
func findActiveOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	sort.Sort(sort.Reverse(byCreation(oldRSs)))
	active := filterActive(append(append([]*appsv1.ReplicaSet{}, oldRSs...), newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return oldRSs[0]
	case 1:
		return active[0]
	default:
		return nil
	}
}

func revision(rs metav1.Object) int64 {
	v, err := strconv.ParseInt(rs.GetAnnotations()[RevisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		m = max(m, revision(rs))
	}
	return m
}

// setNewReplicaSetAnnotations copies the deployment's annotations to the new
// replica set, raises its revision to newRevision (recording the one it
// replaces in the revision history: a rollback), and for a replica set
// about to be created sets the replicas annotations. It reports a change.
func setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision int64, exists bool) bool {
	changed := copyDeploymentAnnotations(d, rs)
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	oldRevision, had := rs.Annotations[RevisionAnnotation]
	oldRev, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil {
		if oldRevision != "" {
			return false
		}
		oldRev = 0
	}
	if oldRev < newRevision {
		rs.Annotations[RevisionAnnotation] = strconv.FormatInt(newRevision, 10)
		changed = true
		if had {
			appendRevisionHistory(rs, oldRevision)
		}
	}
	if !exists && setReplicasAnnotations(rs, *d.Spec.Replicas, *d.Spec.Replicas+maxSurge(d)) {
		changed = true
	}
	return changed
}

func appendRevisionHistory(rs *appsv1.ReplicaSet, old string) {
	hist := rs.Annotations[RevisionHistoryAnnotation]
	if hist == "" {
		rs.Annotations[RevisionHistoryAnnotation] = old
		return
	}
	olds := strings.Split(hist, ",")
	total := len(hist) + len(old) + 1
	start := 0
	for total > maxRevHistoryLengthInChars && start < len(olds) {
		total -= len(olds[start]) + 1
		start++
	}
	if total <= maxRevHistoryLengthInChars {
		rs.Annotations[RevisionHistoryAnnotation] = strings.Join(append(olds[start:], old), ",")
	}
}

func copyDeploymentAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if annotationsToSkip[k] || rs.Annotations[k] == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range map[string]string{
		DesiredReplicasAnnotation: strconv.Itoa(int(desired)),
		MaxReplicasAnnotation:     strconv.Itoa(int(maxReplicas)),
	} {
		if rs.Annotations[k] != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	return rs.Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.Itoa(int(maxReplicas))
}

func intAnnotation(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// resolveFenceposts turns maxSurge (rounded up) and maxUnavailable (rounded
// down) into numbers; if both are 0, maxUnavailable becomes 1.
func resolveFenceposts(surge, unavailable *intstr.IntOrString, desired int32) (int32, int32, error) {
	s, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(surge, intstr.FromInt32(0)), int(desired), true)
	if err != nil {
		return 0, 0, err
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(unavailable, intstr.FromInt32(0)), int(desired), false)
	if err != nil {
		return 0, 0, err
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u), nil
}

func maxSurge(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || d.Spec.Strategy.RollingUpdate == nil {
		return 0
	}
	s, _, _ := resolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, *d.Spec.Replicas)
	return s
}

func maxUnavailable(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || *d.Spec.Replicas == 0 || d.Spec.Strategy.RollingUpdate == nil {
		return 0
	}
	_, u, _ := resolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, *d.Spec.Replicas)
	return min(u, *d.Spec.Replicas)
}

// The sums over replica sets; nil entries count 0.
func sumSpec(rss []*appsv1.ReplicaSet) (n int32) {
	for _, rs := range rss {
		if rs != nil {
			n += *rs.Spec.Replicas
		}
	}
	return n
}

func sumStatus(rss []*appsv1.ReplicaSet, f func(appsv1.ReplicaSetStatus) int32) (n int32) {
	for _, rs := range rss {
		if rs != nil {
			n += f(rs.Status)
		}
	}
	return n
}

func statusReplicas(s appsv1.ReplicaSetStatus) int32  { return s.Replicas }
func statusReady(s appsv1.ReplicaSetStatus) int32     { return s.ReadyReplicas }
func statusAvailable(s appsv1.ReplicaSetStatus) int32 { return s.AvailableReplicas }

// podsUpperBound counts, for rolling decisions, the pods the replica sets
// may have now as far as their status says: max(spec, status.replicas)
// each. Kube counts spec only, so pods of a replica set that was just
// scaled down but whose pods are not gone yet are not counted; counting
// them narrows the moments past the surge bound (status itself lags the
// pods, see the package documentation).
func podsUpperBound(rss []*appsv1.ReplicaSet) (n int32) {
	for _, rs := range rss {
		if rs != nil {
			n += max(*rs.Spec.Replicas, rs.Status.Replicas)
		}
	}
	return n
}

// availableLowerBound counts, for rolling decisions, the available pods the
// replica sets keep: min(spec, status.availableReplicas) each, so a
// replica set scaled down whose status still shows the old count is not
// scaled down twice.
func availableLowerBound(rss []*appsv1.ReplicaSet) (n int32) {
	for _, rs := range rss {
		if rs != nil {
			n += min(*rs.Spec.Replicas, rs.Status.AvailableReplicas)
		}
	}
	return n
}

// newRSNewReplicas is the size the new replica set may have now.
func newRSNewReplicas(d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	switch d.Spec.Strategy.Type {
	case appsv1.RollingUpdateDeploymentStrategyType:
		current := podsUpperBound(allRSs)
		maxTotal := *d.Spec.Replicas + maxSurge(d)
		if current >= maxTotal {
			return *newRS.Spec.Replicas, nil
		}
		up := min(maxTotal-current, *d.Spec.Replicas-*newRS.Spec.Replicas)
		return *newRS.Spec.Replicas + up, nil
	case appsv1.RecreateDeploymentStrategyType:
		return *d.Spec.Replicas, nil
	default:
		return 0, fmt.Errorf("deployment: strategy type %q not supported", d.Spec.Strategy.Type)
	}
}

// isSaturated: the replica set has all the deployment's replicas and both
// agree on it (desired-replicas annotation).
func isSaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, ok := intAnnotation(rs, DesiredReplicasAnnotation)
	return ok && *rs.Spec.Replicas == *d.Spec.Replicas && desired == *d.Spec.Replicas && rs.Status.AvailableReplicas == *d.Spec.Replicas
}

// proportion estimates how many of toAdd replicas (added so far: added)
// the replica set gets when a deployment with several active replica sets
// is scaled.
func proportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if rs == nil || *rs.Spec.Replicas == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := replicaSetFraction(rs, d)
	allowed := toAdd - added
	if toAdd > 0 {
		return min(fraction, allowed)
	}
	return max(fraction, allowed)
}

func replicaSetFraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	if *d.Spec.Replicas == 0 {
		return -*rs.Spec.Replicas
	}
	deploymentReplicas := *d.Spec.Replicas + maxSurge(d)
	annotated, ok := intAnnotation(rs, MaxReplicasAnnotation)
	if !ok || annotated == 0 {
		annotated = d.Status.Replicas
	}
	if annotated == 0 {
		return 0
	}
	size := float64(*rs.Spec.Replicas*deploymentReplicas) / float64(annotated)
	return int32(math.Round(size)) - *rs.Spec.Replicas
}

// Conditions.

func newCondition(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string, now time.Time) appsv1.DeploymentCondition {
	ts := metav1.NewTime(now)
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg, LastUpdateTime: ts, LastTransitionTime: ts}
}

func getCondition(st appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			c := st.Conditions[i]
			return &c
		}
	}
	return nil
}

// setCondition adds or replaces a condition unless one with the same status
// and reason is there; the transition time stays when the status does.
func setCondition(st *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := getCondition(*st, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(st, c.Type)
	st.Conditions = append(st.Conditions, c)
}

func removeCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// deploymentComplete: every replica is updated and available, no old ones
// are left, and the status is of the current generation.
func deploymentComplete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	r := *d.Spec.Replicas
	return st.UpdatedReplicas == r && st.Replicas == r && st.AvailableReplicas == r && st.ObservedGeneration >= d.Generation
}

// deploymentProgressing: new pods were added or became available, or old
// ones went away, since the last status.
func deploymentProgressing(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	old := d.Status
	return st.UpdatedReplicas > old.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.AvailableReplicas > old.AvailableReplicas
}

// deploymentTimedOut: the Progressing condition was last updated more than
// progressDeadlineSeconds ago, or already says so.
func deploymentTimedOut(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	c := getCondition(*st, appsv1.DeploymentProgressing)
	if c == nil {
		return false
	}
	if c.Reason == ReasonTimedOut {
		return true
	}
	return c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Before(now)
}
