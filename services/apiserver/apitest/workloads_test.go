package apitest

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func testDaemonSet(name string) *appsv1.DaemonSet {
	d := testDeployment(name, 1)
	return &appsv1.DaemonSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.DaemonSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}}
}

func testStatefulSet(name string, replicas int32) *appsv1.StatefulSet {
	d := testDeployment(name, replicas)
	return &appsv1.StatefulSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.StatefulSetSpec{
		Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template, ServiceName: name,
	}}
}

func testJob(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox:1.36", Command: []string{"true"}}},
		}}},
	}
}

func testCronJob(name, schedule string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       batchv1.CronJobSpec{Schedule: schedule, JobTemplate: batchv1.JobTemplateSpec{Spec: testJob(name).Spec}},
	}
}

// firstRow is tableOf's columns and first row, failing when it has none.
func firstRow(t *testing.T, env *controlplanetest.Env, path string) ([]string, []any) {
	t.Helper()
	cols, rows := tableOf(t, env, path)
	if len(rows) == 0 {
		t.Fatalf("%s: no rows", path)
	}
	return cols, rows[0]
}

// TestWorkloadsDiscovery: apps/v1 and batch/v1 list the workload kinds
// with their subresources, short names and the "all" category.
func TestWorkloadsDiscovery(t *testing.T) {
	env := controlplanetest.Start(t)
	tests := []struct {
		gv    string
		names []string
		short map[string][]string
	}{
		// Subresources come in the order the registry lists them.
		{"apps/v1", []string{"controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/status", "deployments/scale",
			"replicasets", "replicasets/status", "replicasets/scale", "statefulsets", "statefulsets/status", "statefulsets/scale"},
			map[string][]string{"daemonsets": {"ds"}, "statefulsets": {"sts"}, "controllerrevisions": nil}},
		{"batch/v1", []string{"cronjobs", "cronjobs/status", "jobs", "jobs/status"},
			map[string][]string{"cronjobs": {"cj"}, "jobs": nil}},
	}
	for _, tt := range tests {
		l, err := env.Client.Discovery().ServerResourcesForGroupVersion(tt.gv)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range l.APIResources {
			names = append(names, r.Name)
			short, ok := tt.short[r.Name]
			if !ok {
				continue
			}
			wantCats := []string{"all"}
			if r.Name == "controllerrevisions" {
				wantCats = nil
			}
			if !r.Namespaced || !slices.Equal(r.ShortNames, short) || !slices.Equal(r.Categories, wantCats) {
				t.Errorf("%s: %+v", r.Name, r)
			}
		}
		if !slices.Equal(names, tt.names) {
			t.Errorf("%s resources %v", tt.gv, names)
		}
	}
}

// TestDaemonSetAPI: create resets status and starts the template
// generation, the status subresource writes only status, a spec update
// keeps status and counts the generation, the table, and bad input.
func TestDaemonSetAPI(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	dss := env.Client.AppsV1().DaemonSets("default")
	in := testDaemonSet("agent")
	in.Status.NumberReady = 4
	got, err := dss.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 1 || got.Status.NumberReady != 0 || got.Annotations[appsv1.DeprecatedTemplateGeneration] != "1" ||
		got.Spec.UpdateStrategy.RollingUpdate == nil || *got.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable != intstr.FromInt32(1) {
		t.Errorf("created %+v", got)
	}
	got.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, NumberReady: 1, ObservedGeneration: 1}
	got.Spec.MinReadySeconds = 30
	st, err := dss.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.DesiredNumberScheduled != 2 || st.Spec.MinReadySeconds != 0 || st.Generation != 1 {
		t.Errorf("status update: %+v", st)
	}
	st.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
	st.Status.NumberReady = 9
	upd, err := dss.Update(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if upd.Generation != 2 || upd.Status.NumberReady != 1 || upd.Annotations[appsv1.DeprecatedTemplateGeneration] != "2" {
		t.Errorf("update: generation %d, status %+v, annotations %v", upd.Generation, upd.Status, upd.Annotations)
	}

	cols, cells := firstRow(t, env, "/apis/apps/v1/namespaces/default/daemonsets/agent")
	if !slices.Equal(cols, []string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers", "Images", "Selector"}) ||
		cells[0] != "agent" || cells[1] != float64(2) || cells[6] != "<none>" || cells[9] != "busybox:1.37" || cells[10] != "app=agent" {
		t.Errorf("table %v %v", cols, cells)
	}

	t.Run("invalid", func(t *testing.T) {
		wantInvalid(t, env, "apps", "DaemonSet", []string{"spec.updateStrategy.rollingUpdate.maxSurge"}, func() error {
			bad := testDaemonSet("bad")
			bad.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr(intstr.FromInt32(1)), MaxSurge: ptr(intstr.FromInt32(1))}
			_, err := dss.Create(ctx, bad, metav1.CreateOptions{})
			return err
		})
		wantInvalid(t, env, "apps", "DaemonSet", []string{"spec.template.spec.restartPolicy"}, func() error {
			bad := testDaemonSet("bad")
			bad.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
			_, err := dss.Create(ctx, bad, metav1.CreateOptions{})
			return err
		})
		wantInvalid(t, env, "apps", "DaemonSet", []string{"spec.selector", "spec.template.metadata.labels"}, func() error {
			cur, err := dss.Get(ctx, "agent", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
			_, err = dss.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if _, err := dss.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("refused daemonset stored: %v", err)
		}
	})
}

// TestStatefulSetAPI: the strategy, the scale subresource, the table, and
// the fields an update may not change.
func TestStatefulSetAPI(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	stss := env.Client.AppsV1().StatefulSets("default")
	in := testStatefulSet("db", 3)
	in.Status.ReadyReplicas = 3
	got, err := stss.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 1 || got.Status.ReadyReplicas != 0 || got.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement ||
		*got.Spec.UpdateStrategy.RollingUpdate.Partition != 0 || got.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("created %+v", got)
	}
	got.Status = appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 2, CurrentReplicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2}
	if _, err := stss.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	sc, err := stss.GetScale(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 3 || sc.Status.Replicas != 3 || sc.Status.Selector != "app=db" {
		t.Errorf("scale %+v", sc)
	}
	sc.Spec.Replicas = 5
	if _, err := stss.UpdateScale(ctx, "db", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := stss.Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *cur.Spec.Replicas != 5 || cur.Generation != 2 || cur.Status.ReadyReplicas != 2 {
		t.Errorf("after scale: replicas %d, generation %d, status %+v", *cur.Spec.Replicas, cur.Generation, cur.Status)
	}

	cols, cells := firstRow(t, env, "/apis/apps/v1/namespaces/default/statefulsets/db")
	if !slices.Equal(cols, []string{"Name", "Ready", "Age", "Containers", "Images"}) || cells[0] != "db" || cells[1] != "2/5" || cells[4] != "busybox:1.36" {
		t.Errorf("table %v %v", cols, cells)
	}

	t.Run("invalid", func(t *testing.T) {
		update := func(mutate func(*appsv1.StatefulSet)) func() error {
			return func() error {
				cur, err := stss.Get(ctx, "db", metav1.GetOptions{})
				if err != nil {
					return err
				}
				mutate(cur)
				_, err = stss.Update(ctx, cur, metav1.UpdateOptions{})
				return err
			}
		}
		wantInvalid(t, env, "apps", "StatefulSet", []string{"spec"}, update(func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other" }))
		wantInvalid(t, env, "apps", "StatefulSet", []string{"spec"}, update(func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
		}))
		wantInvalid(t, env, "apps", "StatefulSet", []string{"spec.podManagementPolicy"}, func() error {
			bad := testStatefulSet("bad", 1)
			bad.Spec.PodManagementPolicy = "Random"
			_, err := stss.Create(ctx, bad, metav1.CreateOptions{})
			return err
		})
		wantInvalid(t, env, "apps", "StatefulSet", []string{"spec.updateStrategy.rollingUpdate.partition"}, func() error {
			bad := testStatefulSet("bad", 1)
			bad.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr[int32](-1)}
			_, err := stss.Create(ctx, bad, metav1.CreateOptions{})
			return err
		})
		wantInvalid(t, env, "autoscaling", "Scale", []string{"spec.replicas"}, func() error {
			_, err := stss.UpdateScale(ctx, "db", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
				Spec: autoscalingv1.ScaleSpec{Replicas: -1}}, metav1.UpdateOptions{})
			return err
		})
	})
}

// TestJobAPI: the generated selector and labels, the strategy, the field
// selector, the table, and bad jobs.
func TestJobAPI(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	jobs := env.Client.BatchV1().Jobs("default")
	in := testJob("pi")
	in.Status.Succeeded = 3
	got, err := jobs.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := string(got.UID)
	if got.Generation != 1 || got.Status.Succeeded != 0 || *got.Spec.Completions != 1 || *got.Spec.BackoffLimit != 6 ||
		got.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] != uid ||
		got.Spec.Template.Labels[batchv1.JobNameLabel] != "pi" || got.Spec.Template.Labels["controller-uid"] != uid {
		t.Errorf("created %+v", got)
	}

	// A generated name is there before the strategy labels the template.
	gen := testJob("")
	gen.GenerateName = "batch-"
	g, err := jobs.Create(ctx, gen, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Name) != len("batch-")+5 || g.Spec.Template.Labels[batchv1.JobNameLabel] != g.Name || g.Spec.Template.Labels["job-name"] != g.Name {
		t.Errorf("generated name %q, template labels %v", g.Name, g.Spec.Template.Labels)
	}

	start := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	done := metav1.NewTime(start.Add(20 * time.Second))
	got.Status = batchv1.JobStatus{Succeeded: 1, StartTime: &start, CompletionTime: &done, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}, {Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	if _, err := jobs.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := jobs.List(ctx, metav1.ListOptions{FieldSelector: "status.successful=1"})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("list by status.successful: %v %v", err, l)
	}

	cols, cells := firstRow(t, env, "/apis/batch/v1/namespaces/default/jobs/pi")
	if !slices.Equal(cols, []string{"Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"}) ||
		cells[1] != "Complete" || cells[2] != "1/1" || cells[3] != "20s" || cells[7] != "batch.kubernetes.io/controller-uid="+uid {
		t.Errorf("table %v %v", cols, cells)
	}

	// Controllers speak protobuf.
	t.Run("protobuf", func(t *testing.T) {
		cfg := rest.CopyConfig(env.Config)
		cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeProtobuf, runtime.ContentTypeProtobuf
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pb := cs.BatchV1().Jobs("default")
		mode := batchv1.IndexedCompletion
		in := testJob("proto")
		in.Spec.CompletionMode, in.Spec.Completions, in.Spec.Parallelism = &mode, ptr[int32](4), ptr[int32](2)
		if _, err := pb.Create(ctx, in, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := pb.Get(ctx, "proto", metav1.GetOptions{})
		if err != nil || *got.Spec.CompletionMode != batchv1.IndexedCompletion || *got.Spec.Completions != 4 || got.Spec.Selector == nil {
			t.Fatalf("get over protobuf: %v %+v", err, got)
		}
		if _, err := cs.AppsV1().StatefulSets("default").List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list statefulsets over protobuf: %v", err)
		}
	})

	// batch/v1 orphans a Job's pods unless the delete says otherwise.
	t.Run("delete orphans by default", func(t *testing.T) {
		if err := jobs.Delete(ctx, g.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		left, err := jobs.Get(ctx, g.Name, metav1.GetOptions{})
		if err != nil || left.DeletionTimestamp == nil || !slices.Equal(left.Finalizers, []string{metav1.FinalizerOrphanDependents}) {
			t.Fatalf("after a plain delete: %v %+v", err, left)
		}
		bg := metav1.DeletePropagationBackground
		other, err := jobs.Create(ctx, testJob("other"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := jobs.Delete(ctx, other.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Fatal(err)
		}
		if _, err := jobs.Get(ctx, other.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after a background delete: %v", err)
		}
	})

	t.Run("invalid", func(t *testing.T) {
		create := func(mutate func(*batchv1.Job)) func() error {
			return func() error {
				j := testJob("bad")
				mutate(j)
				_, err := jobs.Create(ctx, j, metav1.CreateOptions{})
				return err
			}
		}
		wantInvalid(t, env, "batch", "Job", []string{"spec.completions"}, create(func(j *batchv1.Job) { j.Spec.Completions = ptr[int32](-1) }))
		wantInvalid(t, env, "batch", "Job", []string{"spec.template.spec.restartPolicy"}, create(func(j *batchv1.Job) {
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}))
		wantInvalid(t, env, "batch", "Job", []string{"spec.completions"}, create(func(j *batchv1.Job) {
			mode := batchv1.IndexedCompletion
			j.Spec.CompletionMode, j.Spec.Parallelism = &mode, ptr[int32](2)
		}))
		wantInvalid(t, env, "batch", "Job", []string{"spec.template"}, func() error {
			cur, err := jobs.Get(ctx, "pi", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
			_, err = jobs.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		// Complete and SuccessCriteriaMet may not be taken back.
		wantInvalid(t, env, "batch", "Job", []string{"status.conditions", "status.conditions"}, func() error {
			cur, err := jobs.Get(ctx, "pi", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.Conditions = nil
			cur.Status.CompletionTime = nil
			_, err = jobs.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if _, err := jobs.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("refused job stored: %v", err)
		}
	})
}

// TestCronJobAPI: the defaults, the strategy, the table, and bad
// schedules and time zones.
func TestCronJobAPI(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	cjs := env.Client.BatchV1().CronJobs("default")
	// Watches of the new kinds are served from the log like every other.
	w, err := cjs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	in := testCronJob("nightly", "0 3 * * *")
	in.Spec.TimeZone = ptr("Europe/Paris")
	in.Status.Active = []corev1.ObjectReference{{Name: "x"}}
	got, err := cjs.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 1 || len(got.Status.Active) != 0 || got.Spec.ConcurrencyPolicy != batchv1.AllowConcurrent ||
		*got.Spec.SuccessfulJobsHistoryLimit != 3 || *got.Spec.FailedJobsHistoryLimit != 1 || *got.Spec.Suspend {
		t.Errorf("created %+v", got)
	}
	select {
	case ev := <-w.ResultChan():
		if cj, ok := ev.Object.(*batchv1.CronJob); ev.Type != watch.Added || !ok || cj.Name != "nightly" || cj.ResourceVersion != got.ResourceVersion {
			t.Errorf("watch event %s %T %+v", ev.Type, ev.Object, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event for the created cronjob")
	}
	got.Spec.Suspend = ptr(true)
	upd, err := cjs.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if upd.Generation != 2 {
		t.Errorf("generation after suspend %d", upd.Generation)
	}
	cols, cells := firstRow(t, env, "/apis/batch/v1/namespaces/default/cronjobs/nightly")
	if !slices.Equal(cols, []string{"Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images", "Selector"}) ||
		cells[1] != "0 3 * * *" || cells[2] != "Europe/Paris" || cells[3] != "True" || cells[4] != float64(0) || cells[5] != "<none>" {
		t.Errorf("table %v %v", cols, cells)
	}

	create := func(mutate func(*batchv1.CronJob)) func() error {
		return func() error {
			c := testCronJob("bad", "@hourly")
			mutate(c)
			_, err := cjs.Create(ctx, c, metav1.CreateOptions{})
			return err
		}
	}
	wantInvalid(t, env, "batch", "CronJob", []string{"spec.schedule"}, create(func(c *batchv1.CronJob) { c.Spec.Schedule = "every minute" }))
	wantInvalid(t, env, "batch", "CronJob", []string{"spec.schedule"}, create(func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=UTC 0 * * * *" }))
	wantInvalid(t, env, "batch", "CronJob", []string{"spec.timeZone"}, create(func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr("Mars/Olympus") }))
	wantInvalid(t, env, "batch", "CronJob", []string{"spec.concurrencyPolicy"}, create(func(c *batchv1.CronJob) { c.Spec.ConcurrencyPolicy = "Never" }))
	wantInvalid(t, env, "batch", "CronJob", []string{"spec.jobTemplate.spec.template.spec.restartPolicy"}, create(func(c *batchv1.CronJob) {
		c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}))
	if _, err := cjs.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("refused cronjob stored: %v", err)
	}
}

// TestControllerRevisionAPI: revisions are stored as given, their data is
// immutable, and the table names their controller.
func TestControllerRevisionAPI(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	crs := env.Client.AppsV1().ControllerRevisions("default")
	in := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "db-7f9c", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "u", Controller: ptr(true)}}},
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"metadata":{"labels":{"app":"db"}}}}}`)}, Revision: 1,
	}
	got, err := crs.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != 1 || string(got.Data.Raw) != string(in.Data.Raw) {
		t.Errorf("created %+v (%s)", got, got.Data.Raw)
	}
	got.Revision = 2
	if got, err = crs.Update(ctx, got, metav1.UpdateOptions{}); err != nil || got.Revision != 2 {
		t.Fatalf("update revision: %v", err)
	}
	cols, cells := firstRow(t, env, "/apis/apps/v1/namespaces/default/controllerrevisions/db-7f9c")
	if !slices.Equal(cols, []string{"Name", "Controller", "Revision", "Age"}) || cells[1] != "statefulset.apps/db" || cells[2] != float64(2) {
		t.Errorf("table %v %v", cols, cells)
	}
	wantInvalid(t, env, "apps", "ControllerRevision", []string{"data"}, func() error {
		got.Data.Raw = []byte(`{"spec":{}}`)
		_, err := crs.Update(ctx, got, metav1.UpdateOptions{})
		return err
	})
	wantInvalid(t, env, "apps", "ControllerRevision", []string{"data", "revision"}, func() error {
		_, err := crs.Create(ctx, &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, Revision: -1}, metav1.CreateOptions{})
		return err
	})
}
