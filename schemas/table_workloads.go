package schemas

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	batchv1beta1 "k8s.io/api/batch/v1beta1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// This file ports the printers of the workload kinds beyond Deployments
// from pkg/printers/internalversion/printers.go (kube 1.32's columns).

func controllerRevisionTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Controller", Type: "string", Description: "Controller of the object"},
		{Name: "Revision", Type: "integer", Description: appsv1.ControllerRevision{}.SwaggerDoc()["revision"]},
		ageColumn,
	}
	return tableOf(cols, func(cr *appsv1.ControllerRevision) []any {
		controller := "<none>"
		if ref := metav1.GetControllerOf(cr); ref != nil {
			if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil {
				controller = strings.ToLower(gv.WithKind(ref.Kind).GroupKind().String()) + "/" + ref.Name
			}
		}
		return []any{cr.Name, controller, cr.Revision, since(now, cr.CreationTimestamp)}
	})
}

func daemonSetTable(now func() time.Time) *table {
	status := extensionsv1beta1.DaemonSetStatus{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Desired", Type: "integer", Description: status["desiredNumberScheduled"]},
		{Name: "Current", Type: "integer", Description: status["currentNumberScheduled"]},
		{Name: "Ready", Type: "integer", Description: status["numberReady"]},
		{Name: "Up-to-date", Type: "integer", Description: status["updatedNumberScheduled"]},
		{Name: "Available", Type: "integer", Description: status["numberAvailable"]},
		{Name: "Node Selector", Type: "string", Description: corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]},
		ageColumn,
		containersColumn,
		imagesColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: extensionsv1beta1.DaemonSetSpec{}.SwaggerDoc()["selector"]},
	}
	return tableOf(cols, func(ds *appsv1.DaemonSet) []any {
		names, images := containerCells(ds.Spec.Template.Spec.Containers)
		st := ds.Status
		return []any{
			ds.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
			int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
			since(now, ds.CreationTimestamp), names, images, metav1.FormatLabelSelector(ds.Spec.Selector),
		}
	})
}

func statefulSetTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		ageColumn,
		containersColumn,
		imagesColumn,
	}
	return tableOf(cols, func(sts *appsv1.StatefulSet) []any {
		names, images := containerCells(sts.Spec.Template.Spec.Containers)
		return []any{
			sts.Name, fmt.Sprintf("%d/%d", sts.Status.ReadyReplicas, int32OrZero(sts.Spec.Replicas)),
			since(now, sts.CreationTimestamp), names, images,
		}
	})
}

func jobTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: "Status of the job."},
		{Name: "Completions", Type: "string", Description: batchv1.JobStatus{}.SwaggerDoc()["succeeded"]},
		{Name: "Duration", Type: "string", Description: "Time required to complete the job."},
		ageColumn,
		containersColumn,
		imagesColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
	}
	return tableOf(cols, func(j *batchv1.Job) []any {
		names, images := containerCells(j.Spec.Template.Spec.Containers)
		return []any{
			j.Name, jobStatusCell(j), jobCompletions(j), jobDuration(j, now), since(now, j.CreationTimestamp),
			names, images, metav1.FormatLabelSelector(j.Spec.Selector),
		}
	})
}

// jobCompletions is printJob's COMPLETIONS: succeeded of completions, or
// of one for a work queue (with its parallelism when above one).
func jobCompletions(j *batchv1.Job) string {
	if j.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	}
	if p := int32OrZero(j.Spec.Parallelism); p > 1 {
		return fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, p)
	}
	return fmt.Sprintf("%d/1", j.Status.Succeeded)
}

// jobDuration is printJob's DURATION: empty before the job starts, the
// time since it started while it runs, its run time once complete.
func jobDuration(j *batchv1.Job, now func() time.Time) string {
	switch st := j.Status; {
	case st.StartTime == nil:
		return ""
	case st.CompletionTime == nil:
		return duration.HumanDuration(now().Sub(st.StartTime.Time))
	default:
		return duration.HumanDuration(st.CompletionTime.Sub(st.StartTime.Time))
	}
}

// jobStatusCell is printJob's STATUS, the first that applies in kube's
// order.
func jobStatusCell(j *batchv1.Job) string {
	st := &j.Status
	switch {
	case jobCondition(st, batchv1.JobComplete):
		return "Complete"
	case jobCondition(st, batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case jobCondition(st, batchv1.JobSuspended):
		return "Suspended"
	case jobCondition(st, batchv1.JobFailureTarget):
		return "FailureTarget"
	case jobCondition(st, batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	}
	return "Running"
}

func cronJobTable(now func() time.Time) *table {
	spec, status := batchv1beta1.CronJobSpec{}.SwaggerDoc(), batchv1beta1.CronJobStatus{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Schedule", Type: "string", Description: spec["schedule"]},
		{Name: "Timezone", Type: "string", Description: spec["timeZone"]},
		{Name: "Suspend", Type: "boolean", Description: spec["suspend"]},
		{Name: "Active", Type: "integer", Description: status["active"]},
		{Name: "Last Schedule", Type: "string", Description: status["lastScheduleTime"]},
		ageColumn,
		containersColumn,
		imagesColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
	}
	return tableOf(cols, func(cj *batchv1.CronJob) []any {
		names, images := containerCells(cj.Spec.JobTemplate.Spec.Template.Spec.Containers)
		last := "<none>"
		if t := cj.Status.LastScheduleTime; t != nil {
			last = since(now, *t)
		}
		tz := "<none>"
		if cj.Spec.TimeZone != nil {
			tz = *cj.Spec.TimeZone
		}
		// printBoolPtr prints a string, in a boolean column.
		suspend := "<unset>"
		if cj.Spec.Suspend != nil {
			suspend = "False"
			if *cj.Spec.Suspend {
				suspend = "True"
			}
		}
		return []any{
			cj.Name, cj.Spec.Schedule, tz, suspend, int64(len(cj.Status.Active)), last, since(now, cj.CreationTimestamp),
			names, images, metav1.FormatLabelSelector(cj.Spec.JobTemplate.Spec.Selector),
		}
	})
}
