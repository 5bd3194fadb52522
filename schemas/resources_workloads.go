package schemas

import (
	"maps"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The Resources of the workload kinds beyond Deployments (apps/v1
// ControllerRevisions, DaemonSets, StatefulSets; batch/v1 Jobs, CronJobs)
// and the parts of their registry strategies (pkg/registry/{apps,batch})
// that go beyond specAndStatus.

func controllerRevisionResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvApps, Kind: "ControllerRevision", Plural: "controllerrevisions", Singular: "controllerrevision",
		Namespaced:       true,
		New:              func() Object { return &appsv1.ControllerRevision{} },
		NewList:          func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		Default:          defaulter(defaultControllerRevision),
		PrepareForCreate: defaulter(prepareNothing[*appsv1.ControllerRevision]),
		PrepareForUpdate: preparer(prepareKeepGeneration[*appsv1.ControllerRevision]),
		ValidateCreate:   createValidator(true, validateControllerRevisionCreate),
		ValidateUpdate:   updateValidator(true, validateControllerRevisionUpdate),
		Fields:           fieldser[*appsv1.ControllerRevision](true, nil),
		Table:            controllerRevisionTable(now),
	}
}

func daemonSetResource(now func() time.Time) *Resource {
	strategy := specAndStatus(daemonSetParts)
	return &Resource{
		GroupVersion: gvApps, Kind: "DaemonSet", Plural: "daemonsets", Singular: "daemonset",
		ShortNames: []string{"ds"}, Categories: []string{"all"}, Namespaced: true,
		Subresources: []string{"status"},
		New:          func() Object { return &appsv1.DaemonSet{} },
		NewList:      func() runtime.Object { return &appsv1.DaemonSetList{} },
		Default:      defaulter(defaultDaemonSet),
		PrepareForCreate: defaulter(func(ds *appsv1.DaemonSet) {
			strategy.create(ds)
			prepareDaemonSetTemplateGeneration(ds, nil)
		}),
		PrepareForUpdate: preparer(func(ds, old *appsv1.DaemonSet) {
			strategy.update(ds, old)
			prepareDaemonSetTemplateGeneration(ds, old)
		}),
		PrepareForStatusUpdate: preparer(func(ds, old *appsv1.DaemonSet) {
			strategy.statusUpdate(ds, old)
			// The annotation is the internal spec.templateGeneration.
			keepAnnotation(ds, old, appsv1.DeprecatedTemplateGeneration)
		}),
		ValidateCreate: createValidator(true, validateDaemonSet),
		ValidateUpdate: updateValidator(true, validateDaemonSetUpdate),
		Fields:         fieldser[*appsv1.DaemonSet](true, nil),
		Table:          daemonSetTable(now),
	}
}

func statefulSetResource(now func() time.Time) *Resource {
	strategy := specAndStatus(statefulSetParts)
	return &Resource{
		GroupVersion: gvApps, Kind: "StatefulSet", Plural: "statefulsets", Singular: "statefulset",
		ShortNames: []string{"sts"}, Categories: []string{"all"}, Namespaced: true,
		Subresources:           []string{"status", "scale"},
		New:                    func() Object { return &appsv1.StatefulSet{} },
		NewList:                func() runtime.Object { return &appsv1.StatefulSetList{} },
		Default:                defaulter(defaultStatefulSet),
		PrepareForCreate:       defaulter(strategy.create),
		PrepareForUpdate:       preparer(strategy.update),
		PrepareForStatusUpdate: preparer(strategy.statusUpdate),
		ValidateCreate:         createValidator(true, validateStatefulSet),
		ValidateUpdate:         updateValidator(true, validateStatefulSetUpdate),
		Fields:                 fieldser[*appsv1.StatefulSet](true, nil),
		Table:                  statefulSetTable(now),
	}
}

func jobResource(now func() time.Time) *Resource {
	strategy := specAndStatus(jobParts)
	return &Resource{
		GroupVersion: gvBatch, Kind: "Job", Plural: "jobs", Singular: "job",
		Categories: []string{"all"}, Namespaced: true,
		OrphanByDefault: true,
		Subresources:    []string{"status"},
		New:             func() Object { return &batchv1.Job{} },
		NewList:         func() runtime.Object { return &batchv1.JobList{} },
		Default:         defaulter(defaultJob),
		PrepareForCreate: defaulter(func(j *batchv1.Job) {
			if !boolOrFalse(j.Spec.ManualSelector) {
				generateJobSelector(j)
			}
			// kube defaults a job's labels to its template's again each
			// time it decodes the stored job, so a job without labels of
			// its own shows the generated ones; storing them does the same.
			if len(j.Labels) == 0 {
				j.Labels = maps.Clone(j.Spec.Template.Labels)
			}
			strategy.create(j)
		}),
		PrepareForUpdate:       preparer(strategy.update),
		PrepareForStatusUpdate: preparer(strategy.statusUpdate),
		ValidateCreate:         createValidator(true, validateJob),
		ValidateUpdate:         updateValidator(true, validateJobUpdate),
		Fields:                 fieldser(true, jobFields),
		Table:                  jobTable(now),
	}
}

func cronJobResource(now func() time.Time) *Resource {
	strategy := specAndStatus(cronJobParts)
	return &Resource{
		GroupVersion: gvBatch, Kind: "CronJob", Plural: "cronjobs", Singular: "cronjob",
		ShortNames: []string{"cj"}, Categories: []string{"all"}, Namespaced: true,
		Subresources:           []string{"status"},
		New:                    func() Object { return &batchv1.CronJob{} },
		NewList:                func() runtime.Object { return &batchv1.CronJobList{} },
		Default:                defaulter(defaultCronJob),
		PrepareForCreate:       defaulter(strategy.create),
		PrepareForUpdate:       preparer(strategy.update),
		PrepareForStatusUpdate: preparer(strategy.statusUpdate),
		ValidateCreate:         createValidator(true, validateCronJob),
		ValidateUpdate:         updateValidator(true, validateCronJobUpdate),
		Fields:                 fieldser[*batchv1.CronJob](true, nil),
		Table:                  cronJobTable(now),
	}
}

// workloadStatusUpdate is validateStatusUpdate for the kinds of this file.
func workloadStatusUpdate(obj, old Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *appsv1.DaemonSet:
		return validateDaemonSetStatusUpdate(o, old.(*appsv1.DaemonSet)), true
	case *appsv1.StatefulSet:
		return validateStatefulSetStatusUpdate(o, old.(*appsv1.StatefulSet)), true
	case *batchv1.Job:
		return validateJobStatusUpdate(o, old.(*batchv1.Job)), true
	case *batchv1.CronJob:
		return validateCronJobStatusUpdate(o, old.(*batchv1.CronJob)), true
	}
	return nil, false
}

func daemonSetParts(ds *appsv1.DaemonSet) (*appsv1.DaemonSetSpec, *appsv1.DaemonSetStatus) {
	return &ds.Spec, &ds.Status
}

func statefulSetParts(sts *appsv1.StatefulSet) (*appsv1.StatefulSetSpec, *appsv1.StatefulSetStatus) {
	return &sts.Spec, &sts.Status
}

func jobParts(j *batchv1.Job) (*batchv1.JobSpec, *batchv1.JobStatus) { return &j.Spec, &j.Status }

func cronJobParts(cj *batchv1.CronJob) (*batchv1.CronJobSpec, *batchv1.CronJobStatus) {
	return &cj.Spec, &cj.Status
}

// prepareDaemonSetTemplateGeneration keeps the internal templateGeneration
// that apps/v1 shows as the deprecated.daemonset.template.generation
// annotation: 1 on create, the old value on update, one more when the
// template changed.
func prepareDaemonSetTemplateGeneration(ds, old *appsv1.DaemonSet) {
	var gen int64
	if old == nil {
		// A value the client sent is kept if it is valid.
		gen, _ = strconv.ParseInt(ds.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
		gen = max(gen, 1)
	} else {
		gen, _ = strconv.ParseInt(old.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
		if !apiequality.Semantic.DeepEqual(ds.Spec.Template, old.Spec.Template) {
			gen++
		}
	}
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	ds.Annotations[appsv1.DeprecatedTemplateGeneration] = strconv.FormatInt(gen, 10)
}

// keepAnnotation sets obj's annotation key to old's, or removes it when
// old has none.
func keepAnnotation(obj, old metav1.Object, key string) {
	a := obj.GetAnnotations()
	v, ok := old.GetAnnotations()[key]
	switch {
	case ok && a == nil:
		a = map[string]string{key: v}
	case ok:
		a[key] = v
	default:
		delete(a, key)
	}
	obj.SetAnnotations(a)
}

// generateJobSelector is the job strategy's generateSelector: the
// template gets the job-name and controller-uid labels (legacy and
// batch.kubernetes.io/ prefixed) unless it sets them itself, and the
// selector selects batch.kubernetes.io/controller-uid. A conflicting value
// the user set is refused by validation. It needs the UID, which the
// apiserver sets before PrepareForCreate.
func generateJobSelector(j *batchv1.Job) {
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	for _, k := range []string{legacyJobNameLabel, batchv1.JobNameLabel} {
		if _, ok := j.Spec.Template.Labels[k]; !ok {
			j.Spec.Template.Labels[k] = j.Name
		}
	}
	for _, k := range []string{legacyControllerUIDLabel, batchv1.ControllerUidLabel} {
		if _, ok := j.Spec.Template.Labels[k]; !ok {
			j.Spec.Template.Labels[k] = string(j.UID)
		}
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, ok := j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !ok {
		j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = string(j.UID)
	}
}

// jobFields is JobToSelectableFields.
func jobFields(j *batchv1.Job) fields.Set {
	return fields.Set{"status.successful": strconv.Itoa(int(j.Status.Succeeded))}
}
