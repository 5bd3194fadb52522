package schemas

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func claimTemplate(name string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// wantCreateErrors runs the create pipeline and returns ValidateCreate's
// errors, rendered by errDetails.

func TestValidateDaemonSet(t *testing.T) {
	res := mustLookup(t, testRegistry(), "apps", "daemonsets")
	tests := []struct {
		name   string
		mutate func(*appsv1.DaemonSet)
		want   []string
	}{
		{"valid", func(*appsv1.DaemonSet) {}, nil},
		{"on delete", func(d *appsv1.DaemonSet) { d.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType }, nil},
		{"surge instead of unavailable", func(d *appsv1.DaemonSet) {
			d.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptrTo(intstr.FromInt32(0)), MaxSurge: ptrTo(intstr.FromString("10%"))}
		}, nil},
		{"both limits", func(d *appsv1.DaemonSet) {
			d.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptrTo(intstr.FromInt32(1)), MaxSurge: ptrTo(intstr.FromInt32(1))}
		}, []string{"FieldValueInvalid spec.updateStrategy.rollingUpdate.maxSurge: may not be set when maxUnavailable is non-zero"}},
		{"neither limit", func(d *appsv1.DaemonSet) {
			d.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptrTo(intstr.FromInt32(0)), MaxSurge: ptrTo(intstr.FromInt32(0))}
		}, []string{"FieldValueRequired spec.updateStrategy.rollingUpdate.maxUnavailable: cannot be 0 when maxSurge is 0"}},
		{"over 100%", func(d *appsv1.DaemonSet) {
			d.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptrTo(intstr.FromString("120%"))}
		}, []string{"FieldValueInvalid spec.updateStrategy.rollingUpdate.maxUnavailable: must not be greater than 100%"}},
		{"strategy type", func(d *appsv1.DaemonSet) { d.Spec.UpdateStrategy.Type = "Sometimes" },
			[]string{`FieldValueNotSupported spec.updateStrategy: supported values: "RollingUpdate", "OnDelete"`}},
		{"selector mismatch", func(d *appsv1.DaemonSet) { d.Spec.Template.Labels = map[string]string{"app": "other"} },
			[]string{"FieldValueInvalid spec.template.metadata.labels: `selector` does not match template `labels`"}},
		{"empty selector", func(d *appsv1.DaemonSet) { d.Spec.Selector = &metav1.LabelSelector{} },
			[]string{"FieldValueInvalid spec.selector: empty selector is invalid for daemonset"}},
		{"restart policy", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]string{`FieldValueNotSupported spec.template.spec.restartPolicy: supported values: "Always"`}},
		{"template validated as a pod's", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.Containers[0].Image = "" },
			[]string{"FieldValueRequired spec.template.spec.containers[0].image: "}},
		{"negative history", func(d *appsv1.DaemonSet) { d.Spec.RevisionHistoryLimit = ptrTo[int32](-1) },
			[]string{"FieldValueInvalid spec.revisionHistoryLimit: must be greater than or equal to 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCreateErrors(t, res, newDaemonSet("agent"), tt.mutate, tt.want)
		})
	}
	t.Run("selector is immutable", func(t *testing.T) {
		old := created(res, newDaemonSet("agent"))
		ds := old.DeepCopy()
		ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "x"}}
		ds.Spec.Template.Labels["tier"] = "x"
		res.PrepareForUpdate(ds, old)
		wantDetails(t, res.ValidateUpdate(ds, old), []string{"FieldValueInvalid spec.selector: field is immutable"})
	})
	t.Run("status counts", func(t *testing.T) {
		old := created(res, newDaemonSet("agent"))
		old.Status.CollisionCount = ptrTo[int32](2)
		ds := old.DeepCopy()
		ds.Status.NumberReady, ds.Status.CollisionCount = -1, ptrTo[int32](1)
		res.PrepareForStatusUpdate(ds, old)
		wantDetails(t, res.ValidateStatus(ds, old), []string{
			"FieldValueInvalid status.numberReady: must be greater than or equal to 0",
			"FieldValueInvalid status.collisionCount: cannot be decremented",
		})
	})
}

func TestValidateStatefulSet(t *testing.T) {
	res := mustLookup(t, testRegistry(), "apps", "statefulsets")
	tests := []struct {
		name   string
		mutate func(*appsv1.StatefulSet)
		want   []string
	}{
		{"valid", func(*appsv1.StatefulSet) {}, nil},
		{"claim mounted", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate("data")}
			s.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}, nil},
		{"claim replaces a template volume", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate("data")}
			// Invalid as a volume, and never used as one.
			s.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: ""}}}}
		}, nil},
		{"hostname and subdomain are the controller's", func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Hostname, s.Spec.Template.Spec.Subdomain = "Not_A_Label", "Nor.This"
		}, nil},
		{"claim template spec", func(s *appsv1.StatefulSet) {
			bad := claimTemplate("data")
			bad.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadWriteOncePod", "ReadWriteOnce", "WriteSometimes"}
			bad.Spec.Resources.Requests = nil
			mode := corev1.PersistentVolumeMode("Tape")
			bad.Spec.VolumeMode = &mode
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate("ok"), bad}
		}, []string{
			`FieldValueNotSupported spec.volumeClaimTemplates[1].spec.accessModes: supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"`,
			"FieldValueForbidden spec.volumeClaimTemplates[1].spec.accessModes: may not use ReadWriteOncePod with other access modes",
			"FieldValueRequired spec.volumeClaimTemplates[1].spec.resources[storage]: ",
			`FieldValueNotSupported spec.volumeClaimTemplates[1].spec.volumeMode: supported values: "Block", "Filesystem"`,
		}},
		{"claim template without access modes", func(s *appsv1.StatefulSet) {
			bad := claimTemplate("data")
			bad.Spec.AccessModes = nil
			bad.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0")
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{bad}
		}, []string{
			"FieldValueRequired spec.volumeClaimTemplates[0].spec.accessModes: at least 1 access mode is required",
			"FieldValueInvalid spec.volumeClaimTemplates[0].spec.resources[storage]: must be greater than zero",
		}},
		{"service name is a DNS label", func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "Db_Service" },
			[]string{"FieldValueInvalid spec.serviceName: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"}},
		{"name is a DNS label", func(s *appsv1.StatefulSet) { s.Name = "db.example" },
			[]string{"FieldValueInvalid metadata.name: must not contain dots"}},
		{"pod management policy", func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = "Random" },
			[]string{"FieldValueInvalid spec.podManagementPolicy: must be 'OrderedReady' or 'Parallel'"}},
		{"negative partition", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptrTo[int32](-1)}
		}, []string{"FieldValueInvalid spec.updateStrategy.rollingUpdate.partition: must be greater than or equal to 0"}},
		{"max unavailable 0", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptrTo(intstr.FromInt32(0))}
		}, []string{"FieldValueInvalid spec.updateStrategy.rollingUpdate.maxUnavailable: cannot be 0"}},
		{"max unavailable over 100%", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptrTo(intstr.FromString("150%"))}
		}, []string{"FieldValueInvalid spec.updateStrategy.rollingUpdate.maxUnavailable: must not be greater than 100%"}},
		{"rolling update with on delete", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{}}
		}, []string{"FieldValueInvalid spec.updateStrategy.rollingUpdate: only allowed for updateStrategy 'RollingUpdate'"}},
		{"retention policy", func(s *appsv1.StatefulSet) {
			s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Keep", WhenScaled: "Delete"}
		}, []string{`FieldValueNotSupported spec.persistentVolumeClaimRetentionPolicy.whenDeleted: supported values: "Delete", "Retain"`}},
		{"negative ordinals start", func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: -1} },
			[]string{"FieldValueInvalid spec.ordinals.start: must be greater than or equal to 0"}},
		{"negative replicas", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptrTo[int32](-2) },
			[]string{"FieldValueInvalid spec.replicas: must be greater than or equal to 0"}},
		// A missing selector selects nothing, so kube reports the template too.
		{"no selector", func(s *appsv1.StatefulSet) { s.Spec.Selector = nil },
			[]string{"FieldValueRequired spec.selector: ", "FieldValueInvalid spec.template.metadata.labels: `selector` does not match template `labels`"}},
		{"restart policy", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			[]string{`FieldValueNotSupported spec.template.spec.restartPolicy: supported values: "Always"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCreateErrors(t, res, newStatefulSet("db"), tt.mutate, tt.want)
		})
	}

	forbidden := "FieldValueForbidden spec: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
	updates := []struct {
		name   string
		mutate func(*appsv1.StatefulSet)
		want   []string
	}{
		{"scale, template, strategy, ordinals", func(s *appsv1.StatefulSet) {
			s.Spec.Replicas = ptrTo[int32](5)
			s.Spec.Template.Spec.Containers[0].Image = "nginx:2"
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptrTo[int32](2)
			s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 3}
			s.Spec.MinReadySeconds = 10
		}, nil},
		{"service name", func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other" }, []string{forbidden}},
		{"selector", func(s *appsv1.StatefulSet) {
			s.Spec.Selector.MatchLabels["tier"] = "x"
			s.Spec.Template.Labels["tier"] = "x"
		}, []string{forbidden}},
		// The claim templates are immutable, so they are not validated again.
		{"volume claim templates", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "more"}}}
		}, []string{forbidden}},
		{"pod management policy", func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }, []string{forbidden}},
	}
	for _, tt := range updates {
		t.Run("update "+tt.name, func(t *testing.T) {
			old := created(res, newStatefulSet("db"))
			sts := old.DeepCopy()
			tt.mutate(sts)
			res.Default(sts)
			res.PrepareForUpdate(sts, old)
			wantDetails(t, res.ValidateUpdate(sts, old), tt.want)
		})
	}
	t.Run("status counts", func(t *testing.T) {
		old := created(res, newStatefulSet("db"))
		sts := old.DeepCopy()
		sts.Status = appsv1.StatefulSetStatus{Replicas: 2, ReadyReplicas: 3, AvailableReplicas: 1}
		res.PrepareForStatusUpdate(sts, old)
		wantDetails(t, res.ValidateStatus(sts, old), []string{"FieldValueInvalid status.readyReplicas: cannot be greater than status.replicas"})
	})
}

func TestValidateJob(t *testing.T) {
	res := mustLookup(t, testRegistry(), "batch", "jobs")
	indexed := func(j *batchv1.Job) {
		mode := batchv1.IndexedCompletion
		j.Spec.CompletionMode, j.Spec.Completions = &mode, ptrTo[int32](4)
	}
	tests := []struct {
		name   string
		mutate func(*batchv1.Job)
		want   []string
	}{
		{"valid", func(*batchv1.Job) {}, nil},
		{"indexed with backoff per index", func(j *batchv1.Job) {
			indexed(j)
			j.Spec.BackoffLimitPerIndex, j.Spec.MaxFailedIndexes = ptrTo[int32](1), ptrTo[int32](2)
		}, nil},
		{"negative completions", func(j *batchv1.Job) { j.Spec.Completions = ptrTo[int32](-1) },
			[]string{"FieldValueInvalid spec.completions: must be greater than or equal to 0"}},
		{"negative parallelism and backoff", func(j *batchv1.Job) { j.Spec.Parallelism, j.Spec.BackoffLimit = ptrTo[int32](-1), ptrTo[int32](-2) },
			[]string{"FieldValueInvalid spec.parallelism: must be greater than or equal to 0", "FieldValueInvalid spec.backoffLimit: must be greater than or equal to 0"}},
		{"restart policy always", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways },
			[]string{`FieldValueRequired spec.template.spec.restartPolicy: valid values: "OnFailure", "Never"`}},
		{"restart policy unset is always", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = "" },
			[]string{`FieldValueRequired spec.template.spec.restartPolicy: valid values: "OnFailure", "Never"`}},
		{"indexed without completions", func(j *batchv1.Job) {
			indexed(j)
			j.Spec.Completions, j.Spec.Parallelism = nil, ptrTo[int32](2)
		}, []string{"FieldValueRequired spec.completions: when completion mode is Indexed"}},
		{"indexed hostname too long", func(j *batchv1.Job) {
			indexed(j)
			j.Name = "a-name-that-is-exactly-sixty-three-characters-long-abcdefghijkl"
			j.Spec.Template.Labels = nil
			j.Spec.Selector = nil
		}, []string{"FieldValueInvalid metadata.name: will not able to create pod with invalid DNS label: a-name-that-is-exactly-sixty-three-characters-long-abcdefghijkl-3"}},
		{"backoff per index needs indexed", func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptrTo[int32](1) },
			[]string{"FieldValueInvalid spec.backoffLimitPerIndex: requires indexed completion mode"}},
		{"max failed indexes above completions", func(j *batchv1.Job) {
			indexed(j)
			j.Spec.BackoffLimitPerIndex, j.Spec.MaxFailedIndexes = ptrTo[int32](1), ptrTo[int32](5)
		}, []string{"FieldValueInvalid spec.maxFailedIndexes: must be less than or equal to completions"}},
		{"completion mode", func(j *batchv1.Job) { mode := batchv1.CompletionMode("Sometimes"); j.Spec.CompletionMode = &mode },
			[]string{`FieldValueNotSupported spec.completionMode: supported values: "NonIndexed", "Indexed"`}},
		{"pod failure policy rules", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: "Retry", OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: "In", Values: []int32{0, 3, 2}}},
				{Action: batchv1.PodFailurePolicyActionFailIndex, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: "DisruptionTarget", Status: "Maybe"}}},
				{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: "NotIn", Values: []int32{1}, ContainerName: ptrTo("nope")}},
				{Action: batchv1.PodFailurePolicyActionFailJob},
			}}
		}, []string{
			`FieldValueNotSupported spec.podFailurePolicy.rules[0].action: supported values: "Count", "FailIndex", "FailJob", "Ignore"`,
			"FieldValueInvalid spec.podFailurePolicy.rules[0].onExitCodes.values[0]: must not be 0 for the In operator",
			"FieldValueInvalid spec.podFailurePolicy.rules[0].onExitCodes.values: must be ordered",
			"FieldValueInvalid spec.podFailurePolicy.rules[1].action: requires the backoffLimitPerIndex to be set",
			`FieldValueNotSupported spec.podFailurePolicy.rules[1].onPodConditions[0].status: supported values: "False", "True", "Unknown"`,
			"FieldValueInvalid spec.podFailurePolicy.rules[2].onExitCodes.containerName: must be one of the container or initContainer names in the pod template",
			"FieldValueInvalid spec.podFailurePolicy.rules[3]: specifying one of OnExitCodes and OnPodConditions is required",
		}},
		{"pod failure policy needs Never", func(j *batchv1.Job) {
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: "In", Values: []int32{42}}}}}
		}, []string{`FieldValueInvalid spec.template.spec.restartPolicy: only "Never" is supported when podFailurePolicy is specified`}},
		{"pod replacement policy with failure policy", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: "In", Values: []int32{42}}}}}
			p := batchv1.TerminatingOrFailed
			j.Spec.PodReplacementPolicy = &p
		}, []string{`FieldValueNotSupported spec.podReplacementPolicy: supported values: "Failed"`}},
		{"success policy needs indexed", func(j *batchv1.Job) {
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptrTo[int32](1)}}}
		}, []string{"FieldValueInvalid spec.successPolicy: requires indexed completion mode"}},
		{"success policy rules", func(j *batchv1.Job) {
			indexed(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{
				{}, {SucceededIndexes: ptrTo("0-2,1")}, {SucceededIndexes: ptrTo("0,1"), SucceededCount: ptrTo[int32](3)}, {SucceededCount: ptrTo[int32](9)},
			}}
		}, []string{
			"FieldValueRequired spec.successPolicy.rules[0]: at least one of succeededCount or succeededIndexes must be specified",
			"FieldValueInvalid spec.successPolicy.rules[1].succeededIndexes: error parsing succeededIndexes: non-increasing order, previous: 2, current: 1",
			"FieldValueInvalid spec.successPolicy.rules[2].succeededCount: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)",
			"FieldValueInvalid spec.successPolicy.rules[3].succeededCount: must be less than or equal to 4 (the number of specified completions)",
		}},
		{"generated label overridden", func(j *batchv1.Job) {
			j.Spec.Template.Labels = map[string]string{"batch.kubernetes.io/job-name": "other"}
		},
			[]string{"FieldValueInvalid spec.template.metadata.labels[batch.kubernetes.io/job-name]: must be 'pi'"}},
		{"manual selector must match", func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptrTo(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
		}, []string{"FieldValueInvalid spec.template.metadata.labels: `selector` does not match template `labels`"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCreateErrors(t, res, newJob("pi"), tt.mutate, tt.want)
		})
	}

	updates := []struct {
		name   string
		old    func(*batchv1.Job)
		mutate func(*batchv1.Job)
		want   []string
	}{
		{"parallelism and suspend change", nil, func(j *batchv1.Job) { j.Spec.Parallelism, j.Spec.Suspend = ptrTo[int32](3), ptrTo(true) }, nil},
		{"completions immutable", nil, func(j *batchv1.Job) { j.Spec.Completions = ptrTo[int32](3) },
			[]string{"FieldValueInvalid spec.completions: field is immutable"}},
		{"indexed completions with parallelism", indexed, func(j *batchv1.Job) { j.Spec.Completions, j.Spec.Parallelism = ptrTo[int32](2), ptrTo[int32](2) }, nil},
		{"indexed completions alone", indexed, func(j *batchv1.Job) { j.Spec.Completions = ptrTo[int32](2) },
			[]string{"FieldValueInvalid spec.completions: can only be modified in tandem with spec.parallelism"}},
		{"template immutable", nil, func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "busybox:2" },
			[]string{"FieldValueInvalid spec.template: field is immutable"}},
		{"suspended job may move", func(j *batchv1.Job) { j.Spec.Suspend = ptrTo(true) },
			func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "b"} }, nil},
		{"but not change image", func(j *batchv1.Job) { j.Spec.Suspend = ptrTo(true) },
			func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "busybox:2" },
			[]string{"FieldValueInvalid spec.template: field is immutable"}},
		{"completion mode immutable", nil, func(j *batchv1.Job) { indexed(j); j.Spec.Completions = ptrTo[int32](1) },
			[]string{"FieldValueInvalid spec.completionMode: field is immutable"}},
	}
	for _, tt := range updates {
		t.Run("update "+tt.name, func(t *testing.T) {
			old := newJob("pi")
			if tt.old != nil {
				tt.old(old)
			}
			old = created(res, old)
			j := old.DeepCopy()
			tt.mutate(j)
			res.Default(j)
			res.PrepareForUpdate(j, old)
			wantDetails(t, res.ValidateUpdate(j, old), tt.want)
		})
	}

	testValidateJobStatus(t, res, indexed)
}

func testValidateJobStatus(t *testing.T, res *Resource, indexed func(*batchv1.Job)) {
	now := metav1.Now()
	later := metav1.NewTime(now.Add(time.Minute))
	cond := func(types ...batchv1.JobConditionType) []batchv1.JobCondition {
		var cs []batchv1.JobCondition
		for _, c := range types {
			cs = append(cs, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
		}
		return cs
	}
	running := func(j *batchv1.Job) { j.Status = batchv1.JobStatus{Failed: 2, Active: 1, StartTime: &now} }
	tests := []struct {
		name   string
		old    func(*batchv1.Job)
		mutate func(*batchv1.Job)
		want   []string
	}{
		{"complete", running, func(j *batchv1.Job) {
			j.Status = batchv1.JobStatus{Failed: 2, Succeeded: 1, StartTime: &now, CompletionTime: &later,
				Conditions: cond(batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)}
		}, nil},
		{"failed", running, func(j *batchv1.Job) {
			j.Status = batchv1.JobStatus{Failed: 7, StartTime: &now, Conditions: cond(batchv1.JobFailureTarget, batchv1.JobFailed)}
		}, nil},
		{"complete too early", running, func(j *batchv1.Job) {
			j.Status = batchv1.JobStatus{Failed: 1, Active: 1, Ready: ptrTo[int32](2), StartTime: &now, Conditions: cond(batchv1.JobComplete)}
		}, []string{
			"FieldValueInvalid status.failed: cannot decrease the failed counter",
			"FieldValueInvalid status.active: active>0 is invalid for finished job",
			"FieldValueInvalid status.ready: cannot set more ready pods than active",
			"FieldValueRequired status.completionTime: completionTime is required for Complete jobs",
			"FieldValueInvalid status.conditions: cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
		}},
		{"failed without failure target", running, func(j *batchv1.Job) {
			j.Status = batchv1.JobStatus{Failed: 7, StartTime: &now, Conditions: cond(batchv1.JobFailed)}
		}, []string{"FieldValueInvalid status.conditions: cannot set Failed=True condition without the FailureTarget=true condition"}},
		{"terminal conditions stay", func(j *batchv1.Job) {
			j.Status = batchv1.JobStatus{StartTime: &now, Conditions: cond(batchv1.JobFailureTarget, batchv1.JobFailed)}
		}, func(j *batchv1.Job) { j.Status.Conditions = nil }, []string{
			"FieldValueInvalid status.conditions: cannot disable the terminal Failed=True condition",
			"FieldValueInvalid status.conditions: cannot disable the terminal FailureTarget=True condition",
		}},
		{"completion before start", running, func(j *batchv1.Job) {
			early := metav1.NewTime(now.Add(-time.Hour))
			j.Status = batchv1.JobStatus{Failed: 2, StartTime: &now, CompletionTime: &early, Conditions: cond(batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)}
		}, []string{"FieldValueInvalid status.completionTime: must be equal to or after `startTime`"}},
		{"start time kept while running", running, func(j *batchv1.Job) { j.Status.StartTime = nil },
			[]string{"FieldValueRequired status.startTime: startTime cannot be removed for unsuspended job"}},
		{"uncounted pods", running, func(j *batchv1.Job) {
			j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"a", ""}, Failed: []types.UID{"a"}}
		}, []string{
			"FieldValueInvalid status.uncountedTerminatedPods.succeeded[1]: must not be empty",
			`FieldValueDuplicate status.uncountedTerminatedPods.failed[0]: `,
		}},
		{"completed indexes of a non-indexed job", running, func(j *batchv1.Job) { j.Status.CompletedIndexes = "0" },
			[]string{"FieldValueInvalid status.completedIndexes: cannot set non-empty completedIndexes when non-indexed completion mode"}},
		{"indexes out of range", func(j *batchv1.Job) {
			indexed(j)
			j.Spec.BackoffLimitPerIndex = ptrTo[int32](1)
			running(j)
		}, func(j *batchv1.Job) {
			j.Status.CompletedIndexes, j.Status.FailedIndexes = "0-2,7", ptrTo("1")
		}, []string{
			`FieldValueInvalid status.completedIndexes: error parsing completedIndexes: too large index: "7"`,
			"FieldValueInvalid status.failedIndexes: failedIndexes and completedIndexes overlap at index: 1",
		}},
		{"stale indexes are not checked again", func(j *batchv1.Job) {
			indexed(j)
			running(j)
			j.Status.CompletedIndexes = "0-9"
		}, func(j *batchv1.Job) { j.Status.Active = 0 }, nil},
	}
	for _, tt := range tests {
		t.Run("status "+tt.name, func(t *testing.T) {
			old := newJob("pi")
			if tt.old != nil {
				tt.old(old)
			}
			st := old.Status
			old = created(res, old)
			old.Status = st
			j := old.DeepCopy()
			tt.mutate(j)
			res.PrepareForStatusUpdate(j, old)
			wantDetails(t, res.ValidateStatus(j, old), tt.want)
		})
	}
}

func TestValidateCronJob(t *testing.T) {
	res := mustLookup(t, testRegistry(), "batch", "cronjobs")
	tests := []struct {
		name   string
		mutate func(*batchv1.CronJob)
		want   []string
	}{
		{"valid", func(*batchv1.CronJob) {}, nil},
		{"descriptor and zone", func(c *batchv1.CronJob) { c.Spec.Schedule, c.Spec.TimeZone = "@daily", ptrTo("America/New_York") }, nil},
		{"bad schedule", func(c *batchv1.CronJob) { c.Spec.Schedule = "every minute" },
			[]string{"FieldValueInvalid spec.schedule: expected exactly 5 fields, found 2: [every minute]"}},
		{"out of range", func(c *batchv1.CronJob) { c.Spec.Schedule = "61 * * * *" },
			[]string{"FieldValueInvalid spec.schedule: end of range (61) above maximum (59): 61"}},
		{"no schedule", func(c *batchv1.CronJob) { c.Spec.Schedule = "" }, []string{"FieldValueRequired spec.schedule: "}},
		// robfig/cron panics on an empty TZ=; kube recovers and refuses it.
		{"empty TZ", func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=" }, []string{
			"FieldValueInvalid spec.schedule: invalid schedule TZ=: runtime error: slice bounds out of range [:-1]",
			"FieldValueInvalid spec.schedule: cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
		}},
		{"TZ in schedule", func(c *batchv1.CronJob) { c.Spec.Schedule = "CRON_TZ=UTC 0 * * * *" },
			[]string{"FieldValueInvalid spec.schedule: cannot use TZ or CRON_TZ in schedule, use timeZone field instead"}},
		{"unknown time zone", func(c *batchv1.CronJob) { c.Spec.TimeZone = ptrTo("Mars/Olympus") },
			[]string{"FieldValueInvalid spec.timeZone: unknown time zone Mars/Olympus"}},
		{"time zone with a digit part", func(c *batchv1.CronJob) { c.Spec.TimeZone = ptrTo("Europe/Pa ris") },
			[]string{"FieldValueInvalid spec.timeZone: unknown time zone Europe/Pa ris"}},
		{"local time zone", func(c *batchv1.CronJob) { c.Spec.TimeZone = ptrTo("Local") },
			[]string{"FieldValueInvalid spec.timeZone: timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"}},
		{"empty time zone", func(c *batchv1.CronJob) { c.Spec.TimeZone = ptrTo("") },
			[]string{"FieldValueInvalid spec.timeZone: timeZone must be nil or non-empty string"}},
		{"concurrency policy", func(c *batchv1.CronJob) { c.Spec.ConcurrencyPolicy = "Sometimes" },
			[]string{`FieldValueNotSupported spec.concurrencyPolicy: supported values: "Allow", "Forbid", "Replace"`}},
		{"history limits", func(c *batchv1.CronJob) {
			c.Spec.SuccessfulJobsHistoryLimit, c.Spec.FailedJobsHistoryLimit = ptrTo[int32](-1), ptrTo[int32](-1)
		},
			[]string{"FieldValueInvalid spec.successfulJobsHistoryLimit: must be greater than or equal to 0", "FieldValueInvalid spec.failedJobsHistoryLimit: must be greater than or equal to 0"}},
		{"job template selector", func(c *batchv1.CronJob) {
			c.Spec.JobTemplate.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
			c.Spec.JobTemplate.Spec.ManualSelector = ptrTo(true)
		}, []string{"FieldValueInvalid spec.jobTemplate.spec.selector: `selector` will be auto-generated", `FieldValueNotSupported spec.jobTemplate.spec.manualSelector: supported values: "nil", "false"`}},
		{"job template restart policy", func(c *batchv1.CronJob) {
			c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		},
			[]string{`FieldValueRequired spec.jobTemplate.spec.template.spec.restartPolicy: valid values: "OnFailure", "Never"`}},
		{"job template completions", func(c *batchv1.CronJob) { c.Spec.JobTemplate.Spec.Completions = ptrTo[int32](-3) },
			[]string{"FieldValueInvalid spec.jobTemplate.spec.completions: must be greater than or equal to 0"}},
		{"name leaves room for the job suffix", func(c *batchv1.CronJob) { c.Name = "a-cron-job-name-that-is-fifty-three-characters-long-x" },
			[]string{"FieldValueInvalid metadata.name: must be no more than 52 characters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCreateErrors(t, res, newCronJob("nightly"), tt.mutate, tt.want)
		})
	}
	t.Run("update validates the schedule", func(t *testing.T) {
		old := created(res, newCronJob("nightly"))
		cj := old.DeepCopy()
		cj.Spec.Schedule = "* * *"
		res.PrepareForUpdate(cj, old)
		wantDetails(t, res.ValidateUpdate(cj, old), []string{"FieldValueInvalid spec.schedule: expected exactly 5 fields, found 3: [* * *]"})
	})
}

func TestValidateControllerRevision(t *testing.T) {
	res := mustLookup(t, testRegistry(), "apps", "controllerrevisions")
	cr := func() *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "default"},
			Data: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)}, Revision: 1}
	}
	wantCreateErrors(t, res, cr(), func(*appsv1.ControllerRevision) {}, nil)
	for _, tt := range []struct {
		data string
		want []string
	}{
		{"", []string{"FieldValueRequired data: data is mandatory", "FieldValueInvalid revision: must be greater than or equal to 0"}},
		{"null", []string{"FieldValueRequired data: data is mandatory", "FieldValueInvalid revision: must be greater than or equal to 0"}},
		{"[1]", []string{"FieldValueRequired data: data must be a valid JSON object", "FieldValueInvalid revision: must be greater than or equal to 0"}},
		{"{", []string{"FieldValueInvalid data: error parsing data: unexpected end of JSON input", "FieldValueInvalid revision: must be greater than or equal to 0"}},
	} {
		bad := cr()
		bad.Data, bad.Revision = runtime.RawExtension{}, -1
		if tt.data != "" {
			bad.Data.Raw = []byte(tt.data)
		}
		wantCreateErrors(t, res, bad, func(*appsv1.ControllerRevision) {}, tt.want)
	}

	old := created(res, cr())
	upd := old.DeepCopy()
	upd.Data.Raw = []byte(`{"spec":{"x":1}}`)
	upd.Revision = 2
	wantDetails(t, res.ValidateUpdate(upd, old), []string{"FieldValueInvalid data: field is immutable"})
}

// FuzzValidateCronJobSchedule: a schedule and time zone from a client never
// panic validation (robfig/cron panics on some input, such as an empty
// TZ=), and an accepted schedule is one the cron job controller can parse.
func FuzzValidateCronJobSchedule(f *testing.F) {
	for _, s := range []string{"*/5 * * * *", "@hourly", "TZ=", "CRON_TZ=", "TZ=UTC", "0 0 31 2 *", "1-60/0 * * * *", "@every 1s", "? ? ? ? ?"} {
		f.Add(s, "Europe/Paris")
	}
	f.Add("* * * * *", "")
	f.Add("* * * * *", "../../etc/passwd")
	res := mustLookup(f, testRegistry(), "batch", "cronjobs")
	f.Fuzz(func(t *testing.T, schedule, tz string) {
		cj := newCronJob("fuzz")
		cj.Spec.Schedule = schedule
		if tz != "" {
			cj.Spec.TimeZone = &tz
		}
		res.Default(cj)
		res.PrepareForCreate(cj)
		errs := res.ValidateCreate(cj)
		if len(errs) == 0 {
			if _, err := parseCronSchedule(schedule); err != nil {
				t.Errorf("accepted %q, which does not parse: %v", schedule, err)
			}
		}
	})
}
