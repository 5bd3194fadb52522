package schemas

import (
	"math"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file ports SetObjectDefaults_<Kind> of pkg/apis/apps/v1 and
// pkg/apis/batch/v1 for the workload kinds beyond Deployments: the
// hand-written SetDefaults_* funcs and the generated walks into their pod
// templates.

// defaultControllerRevision: apps/v1 ControllerRevision has no defaults.
func defaultControllerRevision(*appsv1.ControllerRevision) {}

// defaultDaemonSet is SetObjectDefaults_DaemonSet.
func defaultDaemonSet(ds *appsv1.DaemonSet) {
	st := &ds.Spec.UpdateStrategy
	if st.Type == "" {
		st.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if st.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if st.RollingUpdate == nil {
			st.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if st.RollingUpdate.MaxUnavailable == nil {
			one := intstr.FromInt32(1)
			st.RollingUpdate.MaxUnavailable = &one
		}
		if st.RollingUpdate.MaxSurge == nil {
			zero := intstr.FromInt32(0)
			st.RollingUpdate.MaxSurge = &zero
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = ptrTo[int32](10)
	}
	defaultPodSpec(&ds.Spec.Template.Spec)
}

// defaultStatefulSet is SetObjectDefaults_StatefulSet, with the
// MaxUnavailableStatefulSet gate on (beta since kube 1.35): a rolling
// update's maxUnavailable defaults to 1. (With the gate off, as in 1.32,
// kube drops the field instead; cairn's StatefulSet controller honours it.)
func defaultStatefulSet(sts *appsv1.StatefulSet) {
	s := &sts.Spec
	if s.PodManagementPolicy == "" {
		s.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.UpdateStrategy.Type == "" {
		s.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if s.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if s.UpdateStrategy.RollingUpdate.Partition == nil {
			s.UpdateStrategy.RollingUpdate.Partition = ptrTo[int32](0)
		}
		if s.UpdateStrategy.RollingUpdate.MaxUnavailable == nil {
			one := intstr.FromInt32(1)
			s.UpdateStrategy.RollingUpdate.MaxUnavailable = &one
		}
	}
	if s.PersistentVolumeClaimRetentionPolicy == nil {
		s.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if s.Replicas == nil {
		s.Replicas = ptrTo[int32](1)
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptrTo[int32](10)
	}
	defaultPodSpec(&s.Template.Spec)
	for i := range s.VolumeClaimTemplates {
		defaultPersistentVolumeClaim(&s.VolumeClaimTemplates[i])
	}
}

// defaultPersistentVolumeClaim is SetDefaults_PersistentVolumeClaim and
// SetDefaults_PersistentVolumeClaimSpec, with the generated rounding of
// the requested resources.
func defaultPersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
	if pvc.Spec.VolumeMode == nil {
		mode := corev1.PersistentVolumeFilesystem
		pvc.Spec.VolumeMode = &mode
	}
	roundUpResourceList(pvc.Spec.Resources.Limits)
	roundUpResourceList(pvc.Spec.Resources.Requests)
}

// defaultJob is SetObjectDefaults_Job: SetDefaults_Job and the template's
// pod spec.
func defaultJob(j *batchv1.Job) {
	s := &j.Spec
	// Neither set means one pod to completion; only parallelism set means
	// a work queue, whose completions stay nil.
	if s.Completions == nil && s.Parallelism == nil {
		s.Completions = ptrTo[int32](1)
		s.Parallelism = ptrTo[int32](1)
	}
	if s.Parallelism == nil {
		s.Parallelism = ptrTo[int32](1)
	}
	if s.BackoffLimit == nil {
		if s.BackoffLimitPerIndex != nil {
			s.BackoffLimit = ptrTo[int32](math.MaxInt32)
		} else {
			s.BackoffLimit = ptrTo[int32](6)
		}
	}
	// The job shares its template's label map, as it does in kube (the
	// conversion to the internal type does not copy maps), so the labels
	// PrepareForCreate generates on the template show on the job too.
	if len(j.Labels) == 0 {
		j.Labels = j.Spec.Template.Labels
	}
	if s.CompletionMode == nil {
		mode := batchv1.NonIndexedCompletion
		s.CompletionMode = &mode
	}
	if s.Suspend == nil {
		s.Suspend = ptrTo(false)
	}
	if p := s.PodFailurePolicy; p != nil {
		for i := range p.Rules {
			for j := range p.Rules[i].OnPodConditions {
				if c := &p.Rules[i].OnPodConditions[j]; c.Status == "" {
					c.Status = corev1.ConditionTrue
				}
			}
		}
	}
	if s.PodReplacementPolicy == nil {
		policy := batchv1.TerminatingOrFailed
		if s.PodFailurePolicy != nil {
			policy = batchv1.Failed
		}
		s.PodReplacementPolicy = &policy
	}
	if s.ManualSelector == nil {
		s.ManualSelector = ptrTo(false)
	}
	defaultPodSpec(&s.Template.Spec)
}

// defaultCronJob is SetObjectDefaults_CronJob. The job template gets only
// its pod spec's defaults, not SetDefaults_Job: a Job created from it is
// defaulted when it is created.
func defaultCronJob(cj *batchv1.CronJob) {
	s := &cj.Spec
	if s.ConcurrencyPolicy == "" {
		s.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if s.Suspend == nil {
		s.Suspend = ptrTo(false)
	}
	if s.SuccessfulJobsHistoryLimit == nil {
		s.SuccessfulJobsHistoryLimit = ptrTo[int32](3)
	}
	if s.FailedJobsHistoryLimit == nil {
		s.FailedJobsHistoryLimit = ptrTo[int32](1)
	}
	defaultPodSpec(&s.JobTemplate.Spec.Template.Spec)
}
