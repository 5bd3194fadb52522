package schemas

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func newDaemonSet(name string) *appsv1.DaemonSet {
	d := newDeployment(name)
	return &appsv1.DaemonSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.DaemonSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}}
}

func newStatefulSet(name string) *appsv1.StatefulSet {
	d := newDeployment(name)
	return &appsv1.StatefulSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.StatefulSetSpec{
		Selector: d.Spec.Selector, Template: d.Spec.Template, ServiceName: name,
	}}
}

// newJob is a job as the apiserver hands it to the strategy: with its UID.
func newJob(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "work", Image: "busybox"}},
		}}},
	}
}

func newCronJob(name string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       batchv1.CronJobSpec{Schedule: "*/5 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: newJob(name).Spec}},
	}
}

func TestDefaultWorkloads(t *testing.T) {
	r := testRegistry()
	ds := newDaemonSet("d")
	mustLookup(t, r, "apps", "daemonsets").Default(ds)
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil ||
		*ru.MaxUnavailable != intstr.FromInt32(1) || *ru.MaxSurge != intstr.FromInt32(0) || *ds.Spec.RevisionHistoryLimit != 10 ||
		ds.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("daemonset defaults %+v", ds.Spec)
	}

	sts := newStatefulSet("s")
	sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
	mustLookup(t, r, "apps", "statefulsets").Default(sts)
	s := sts.Spec
	if *s.Replicas != 1 || s.PodManagementPolicy != appsv1.OrderedReadyPodManagement ||
		s.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || *s.UpdateStrategy.RollingUpdate.Partition != 0 ||
		*s.UpdateStrategy.RollingUpdate.MaxUnavailable != intstr.FromInt32(1) || *s.RevisionHistoryLimit != 10 ||
		*s.PersistentVolumeClaimRetentionPolicy != (appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Retain", WhenScaled: "Retain"}) ||
		*s.VolumeClaimTemplates[0].Spec.VolumeMode != corev1.PersistentVolumeFilesystem || s.VolumeClaimTemplates[0].Status.Phase != corev1.ClaimPending {
		t.Errorf("statefulset defaults %+v", s)
	}

	tests := []struct {
		name                              string
		mutate                            func(*batchv1.Job)
		completions, parallelism, backoff *int32
		replacement                       batchv1.PodReplacementPolicy
	}{
		{"neither set", func(*batchv1.Job) {}, ptrTo[int32](1), ptrTo[int32](1), ptrTo[int32](6), batchv1.TerminatingOrFailed},
		{"work queue", func(j *batchv1.Job) { j.Spec.Parallelism = ptrTo[int32](4) }, nil, ptrTo[int32](4), ptrTo[int32](6), batchv1.TerminatingOrFailed},
		{"completions only", func(j *batchv1.Job) { j.Spec.Completions = ptrTo[int32](5) }, ptrTo[int32](5), ptrTo[int32](1), ptrTo[int32](6), batchv1.TerminatingOrFailed},
		{"backoff per index", func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptrTo[int32](2) }, ptrTo[int32](1), ptrTo[int32](1), ptrTo[int32](2147483647), batchv1.TerminatingOrFailed},
		{"pod failure policy", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}},
			}}}
		}, ptrTo[int32](1), ptrTo[int32](1), ptrTo[int32](6), batchv1.Failed},
	}
	for _, tt := range tests {
		t.Run("job "+tt.name, func(t *testing.T) {
			j := newJob("j")
			tt.mutate(j)
			mustLookup(t, r, "batch", "jobs").Default(j)
			s := j.Spec
			eq := func(a, b *int32) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
			if !eq(s.Completions, tt.completions) || !eq(s.Parallelism, tt.parallelism) || !eq(s.BackoffLimit, tt.backoff) ||
				*s.PodReplacementPolicy != tt.replacement || *s.CompletionMode != batchv1.NonIndexedCompletion ||
				*s.Suspend || *s.ManualSelector {
				t.Errorf("defaults %+v", s)
			}
			if p := s.PodFailurePolicy; p != nil && p.Rules[0].OnPodConditions[0].Status != corev1.ConditionTrue {
				t.Errorf("onPodConditions status %q", p.Rules[0].OnPodConditions[0].Status)
			}
		})
	}

	cj := newCronJob("c")
	mustLookup(t, r, "batch", "cronjobs").Default(cj)
	if cj.Spec.ConcurrencyPolicy != batchv1.AllowConcurrent || *cj.Spec.Suspend || *cj.Spec.SuccessfulJobsHistoryLimit != 3 ||
		*cj.Spec.FailedJobsHistoryLimit != 1 || cj.Spec.JobTemplate.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("cronjob defaults %+v", cj.Spec)
	}
	// The job template is not defaulted as a job: a job made from it is.
	if jt := cj.Spec.JobTemplate.Spec; jt.Completions != nil || jt.BackoffLimit != nil || jt.ManualSelector != nil {
		t.Errorf("cronjob job template got job defaults: %+v", jt)
	}
}

// TestJobGeneratedSelector: create selects the job's pods by its UID and
// labels the template (and, through the shared map, the job) with its name
// and UID, in the legacy and the batch.kubernetes.io/ keys.
func TestJobGeneratedSelector(t *testing.T) {
	res := mustLookup(t, testRegistry(), "batch", "jobs")
	j := newJob("pi")
	j.Spec.Template.Labels = map[string]string{"app": "pi"}
	j = created(res, j)
	want := map[string]string{"app": "pi", "job-name": "pi", "controller-uid": "uid-pi",
		"batch.kubernetes.io/job-name": "pi", "batch.kubernetes.io/controller-uid": "uid-pi"}
	if !mapsEqual(j.Spec.Template.Labels, want) || !mapsEqual(j.Labels, want) {
		t.Errorf("template labels %v, job labels %v", j.Spec.Template.Labels, j.Labels)
	}
	if !mapsEqual(j.Spec.Selector.MatchLabels, map[string]string{"batch.kubernetes.io/controller-uid": "uid-pi"}) {
		t.Errorf("selector %v", j.Spec.Selector)
	}
	if errs := res.ValidateCreate(j); len(errs) > 0 {
		t.Errorf("generated job invalid: %v", errs)
	}

	// Without labels of its own or its template's, the job shows the
	// generated ones, as kube's read-time defaulting makes it.
	bare := created(res, newJob("bare"))
	if bare.Labels["batch.kubernetes.io/job-name"] != "bare" || bare.Labels["controller-uid"] != "uid-bare" || len(bare.Labels) != 4 {
		t.Errorf("bare job labels %v", bare.Labels)
	}

	manual := newJob("manual")
	manual.Spec.ManualSelector = ptrTo(true)
	manual.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "m"}}
	manual.Spec.Template.Labels = map[string]string{"app": "m"}
	manual = created(res, manual)
	if len(manual.Spec.Template.Labels) != 1 || len(manual.Spec.Selector.MatchLabels) != 1 {
		t.Errorf("manual selector changed: %v %v", manual.Spec.Template.Labels, manual.Spec.Selector)
	}
	if errs := res.ValidateCreate(manual); len(errs) > 0 {
		t.Errorf("manual job invalid: %v", errs)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestWorkloadStrategies: create clears status and sets generation 1, an
// update keeps status and counts spec changes, a status update keeps the
// spec; a DaemonSet's template generation annotation counts template
// changes.
func TestWorkloadStrategies(t *testing.T) {
	r := testRegistry()
	type kind struct {
		plural, group string
		obj           Object
		setStatus     func(Object)
		statusSet     func(Object) bool
		changeSpec    func(Object)
		specChanged   func(Object) bool
	}
	kinds := []kind{
		{"daemonsets", "apps", newDaemonSet("d"),
			func(o Object) { o.(*appsv1.DaemonSet).Status.NumberReady = 3 },
			func(o Object) bool { return o.(*appsv1.DaemonSet).Status.NumberReady == 3 },
			func(o Object) { o.(*appsv1.DaemonSet).Spec.MinReadySeconds = 9 },
			func(o Object) bool { return o.(*appsv1.DaemonSet).Spec.MinReadySeconds == 9 }},
		{"statefulsets", "apps", newStatefulSet("s"),
			func(o Object) { o.(*appsv1.StatefulSet).Status.ReadyReplicas = 3 },
			func(o Object) bool { return o.(*appsv1.StatefulSet).Status.ReadyReplicas == 3 },
			func(o Object) { o.(*appsv1.StatefulSet).Spec.Replicas = ptrTo[int32](5) },
			func(o Object) bool { return *o.(*appsv1.StatefulSet).Spec.Replicas == 5 }},
		{"jobs", "batch", newJob("j"),
			func(o Object) { o.(*batchv1.Job).Status.Active = 3 },
			func(o Object) bool { return o.(*batchv1.Job).Status.Active == 3 },
			func(o Object) { o.(*batchv1.Job).Spec.Suspend = ptrTo(true) },
			func(o Object) bool { return *o.(*batchv1.Job).Spec.Suspend }},
		{"cronjobs", "batch", newCronJob("c"),
			func(o Object) { o.(*batchv1.CronJob).Status.Active = []corev1.ObjectReference{{Name: "x"}} },
			func(o Object) bool { return len(o.(*batchv1.CronJob).Status.Active) == 1 },
			func(o Object) { o.(*batchv1.CronJob).Spec.Schedule = "@hourly" },
			func(o Object) bool { return o.(*batchv1.CronJob).Spec.Schedule == "@hourly" }},
	}
	for _, k := range kinds {
		t.Run(k.plural, func(t *testing.T) {
			res := mustLookup(t, r, k.group, k.plural)
			obj := k.obj
			k.setStatus(obj)
			obj = created(res, obj)
			if k.statusSet(obj) || obj.GetGeneration() != 1 {
				t.Fatalf("create kept status or generation %d", obj.GetGeneration())
			}
			withStatus := obj.DeepCopyObject().(Object)
			k.setStatus(withStatus)
			res.PrepareForStatusUpdate(withStatus, obj)
			if !k.statusSet(withStatus) || withStatus.GetGeneration() != 1 {
				t.Fatalf("status update lost status or bumped generation")
			}
			upd := withStatus.DeepCopyObject().(Object)
			k.changeSpec(upd)
			res.PrepareForUpdate(upd, withStatus)
			if !k.statusSet(upd) || !k.specChanged(upd) || upd.GetGeneration() != 2 {
				t.Errorf("spec update: status kept %v, generation %d", k.statusSet(upd), upd.GetGeneration())
			}
			back := withStatus.DeepCopyObject().(Object)
			res.PrepareForStatusUpdate(back, upd)
			if !k.specChanged(back) || back.GetGeneration() != 2 {
				t.Errorf("status update changed the spec back or the generation: %d", back.GetGeneration())
			}
		})
	}

	t.Run("daemonset template generation", func(t *testing.T) {
		res := mustLookup(t, r, "apps", "daemonsets")
		ds := created(res, newDaemonSet("d"))
		gen := func(ds *appsv1.DaemonSet) string { return ds.Annotations[appsv1.DeprecatedTemplateGeneration] }
		if gen(ds) != "1" {
			t.Fatalf("created with template generation %q", gen(ds))
		}
		scaled := ds.DeepCopy()
		scaled.Spec.MinReadySeconds = 3
		res.PrepareForUpdate(scaled, ds)
		if gen(scaled) != "1" || scaled.Generation != 2 {
			t.Errorf("non-template change: template generation %q, generation %d", gen(scaled), scaled.Generation)
		}
		rolled := scaled.DeepCopy()
		rolled.Spec.Template.Spec.Containers[0].Image = "nginx:2"
		res.PrepareForUpdate(rolled, scaled)
		if gen(rolled) != "2" || rolled.Generation != 3 {
			t.Errorf("template change: template generation %q, generation %d", gen(rolled), rolled.Generation)
		}
		status := rolled.DeepCopy()
		status.Annotations[appsv1.DeprecatedTemplateGeneration] = "7"
		status.Annotations["note"] = "kept"
		res.PrepareForStatusUpdate(status, rolled)
		if gen(status) != "2" || status.Annotations["note"] != "kept" {
			t.Errorf("status update: annotations %v", status.Annotations)
		}
	})
}

func TestWorkloadTables(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r := NewRegistry(WithClock(func() time.Time { return now }))
	created := metav1.NewTime(now.Add(-2 * time.Hour))
	start := metav1.NewTime(now.Add(-90 * time.Second))
	done := metav1.NewTime(now.Add(-30 * time.Second))

	ds := newDaemonSet("agent")
	ds.CreationTimestamp = created
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}

	sts := newStatefulSet("db")
	sts.CreationTimestamp = created
	sts.Spec.Replicas = ptrTo[int32](3)
	sts.Status.ReadyReplicas = 1

	job := newJob("pi")
	job.CreationTimestamp = created
	job.Spec.Completions = ptrTo[int32](4)
	job.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "u"}}
	job.Status = batchv1.JobStatus{Succeeded: 4, StartTime: &start, CompletionTime: &done,
		Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}

	queue := newJob("queue")
	queue.CreationTimestamp = created
	queue.Spec.Parallelism = ptrTo[int32](3)
	queue.Status = batchv1.JobStatus{Succeeded: 1, StartTime: &start}

	suspended := newJob("later")
	suspended.CreationTimestamp = created
	suspended.Spec.Completions = ptrTo[int32](1)
	suspended.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}

	cj := newCronJob("nightly")
	cj.CreationTimestamp = created
	cj.Spec.Suspend = ptrTo(false)
	cj.Spec.TimeZone = ptrTo("Europe/Paris")
	last := metav1.NewTime(now.Add(-5 * time.Minute))
	cj.Status = batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Name: "a"}}, LastScheduleTime: &last}

	never := newCronJob("never")
	never.CreationTimestamp = created

	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "db-5d8f", CreationTimestamp: created,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptrTo(true)}}},
		Revision: 2, Data: runtime.RawExtension{Raw: []byte("{}")}}

	tests := []struct {
		group, plural string
		obj           Object
		cols          []string
		row           []any
	}{
		{"apps", "daemonsets", ds,
			[]string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers", "Images", "Selector"},
			[]any{"agent", int64(3), int64(3), int64(2), int64(1), int64(2), "disk=ssd", "120m", "app", "nginx", "app=web"}},
		{"apps", "statefulsets", sts, []string{"Name", "Ready", "Age", "Containers", "Images"},
			[]any{"db", "1/3", "120m", "app", "nginx"}},
		{"batch", "jobs", job, []string{"Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"},
			[]any{"pi", "Complete", "4/4", "60s", "120m", "work", "busybox", "batch.kubernetes.io/controller-uid=u"}},
		{"batch", "jobs", queue, nil, []any{"queue", "Running", "1/1 of 3", "90s", "120m", "work", "busybox", "<none>"}},
		{"batch", "jobs", suspended, nil, []any{"later", "Suspended", "0/1", "", "120m", "work", "busybox", "<none>"}},
		{"batch", "cronjobs", cj,
			[]string{"Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images", "Selector"},
			[]any{"nightly", "*/5 * * * *", "Europe/Paris", "False", int64(1), "5m", "120m", "work", "busybox", "<none>"}},
		{"batch", "cronjobs", never, nil, []any{"never", "*/5 * * * *", "<none>", "<unset>", int64(0), "<none>", "120m", "work", "busybox", "<none>"}},
		{"apps", "controllerrevisions", cr, []string{"Name", "Controller", "Revision", "Age"},
			[]any{"db-5d8f", "statefulset.apps/db", int64(2), "120m"}},
	}
	for _, tt := range tests {
		t.Run(tt.plural+"/"+tt.obj.GetName(), func(t *testing.T) {
			tbl := mustLookup(t, r, tt.group, tt.plural).Table
			if tt.cols != nil {
				var cols []string
				for _, c := range tbl.Columns() {
					cols = append(cols, c.Name)
				}
				if !slices.Equal(cols, tt.cols) {
					t.Errorf("columns %q", cols)
				}
			}
			if got := tbl.Row(tt.obj); !slices.Equal(got, tt.row) {
				t.Errorf("row %#v\nwant %#v", got, tt.row)
			}
		})
	}
}
