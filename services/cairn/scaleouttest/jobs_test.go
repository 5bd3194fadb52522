package scaleouttest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events"
)

// batchNS holds the Jobs and the CronJob of the scale-out test; a kubelet
// stand-in of its own runs their pods to completion.
const batchNS = "batch"

const (
	jobCount       = 6
	jobCompletions = 10
	jobParallelism = 3
)

// createBatch creates the namespace, jobCount Jobs (every other one
// Indexed) of jobCompletions pods, jobParallelism at a time, and a CronJob
// that fires every minute.
func createBatch(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: batchNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := func() batchv1.JobSpec {
		return batchv1.JobSpec{Completions: ptr[int32](jobCompletions), Parallelism: ptr[int32](jobParallelism),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}
	}
	for i := range jobCount {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%d", i)}, Spec: spec()}
		if i%2 == 1 {
			j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
		}
		if _, err := client.BatchV1().Jobs(batchNS).Create(ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cjSpec := spec()
	cjSpec.Completions, cjSpec.Parallelism = ptr[int32](1), ptr[int32](1)
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "minutely"}, Spec: batchv1.CronJobSpec{
		Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: cjSpec}}}
	if _, err := client.BatchV1().CronJobs(batchNS).Create(ctx, cj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitBatch waits for every Job to complete and the CronJob to have
// fired (its first minute may be up to a minute away).
func waitBatch(t *testing.T, client kubernetes.Interface, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	var pending []string
	for time.Now().Before(deadline) {
		pending = pending[:0]
		for i := range jobCount {
			j, err := client.BatchV1().Jobs(batchNS).Get(ctx, fmt.Sprintf("job-%d", i), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get job: %v", err)
			}
			if !jobComplete(j) {
				pending = append(pending, fmt.Sprintf("%s: succeeded %d active %d failed %d", j.Name, j.Status.Succeeded, j.Status.Active, j.Status.Failed))
			}
		}
		cj, err := client.BatchV1().CronJobs(batchNS).Get(ctx, "minutely", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get cronjob: %v", err)
		}
		if cj.Status.LastScheduleTime == nil {
			pending = append(pending, "cronjob minutely: not fired yet")
		}
		if len(pending) == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("batch work not done after %v:\n%s", timeout, strings.Join(pending, "\n"))
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobState is what the log says of one Job's pods.
type jobState struct {
	name           string
	active         map[string]bool // pod name: active now
	maxActive      int
	succeeded      map[string]bool // pod names that reached Succeeded
	indexes        map[string]int  // completion index: pods that succeeded with it
	indexed        bool
	final          *batchv1.Job
	createdNoCause int
}

// checkBatch replays the batch namespace of the log: no Job ever has more
// active pods than its parallelism, exactly completions pods succeed
// (each index once for an Indexed Job) and the final status counts them,
// every pod create has a cause, and no scheduled time of the CronJob has
// more than one Job.
func checkBatch(log []*events.Event) (problems []string, jobPods int) {
	jobs := map[types.UID]*jobState{}
	fired := map[string]int{}
	for _, ev := range log {
		if ev.Namespace != batchNS {
			continue
		}
		switch {
		case ev.Group == "batch" && ev.Resource == "jobs":
			var j batchv1.Job
			if err := json.Unmarshal(ev.Object, &j); err != nil {
				problems = append(problems, fmt.Sprintf("revision %d: decode job: %v", ev.Revision, err))
				continue
			}
			if ev.Type == events.Added && metav1.GetControllerOf(&j) != nil {
				fired[j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]]++
			}
			js := jobs[j.UID]
			if js == nil {
				js = &jobState{name: j.Name, active: map[string]bool{}, succeeded: map[string]bool{}, indexes: map[string]int{},
					indexed: j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion}
				jobs[j.UID] = js
			}
			js.final = &j
		case ev.Group == "" && ev.Resource == "pods":
			var p corev1.Pod
			if err := json.Unmarshal(ev.Object, &p); err != nil {
				problems = append(problems, fmt.Sprintf("revision %d: decode pod: %v", ev.Revision, err))
				continue
			}
			ref := metav1.GetControllerOf(&p)
			if ref == nil || jobs[ref.UID] == nil {
				continue
			}
			js := jobs[ref.UID]
			if ev.Type == events.Added {
				jobPods++
				if ev.CausationID == "" {
					js.createdNoCause++
				}
			}
			js.active[p.Name] = ev.Type != events.Deleted && p.DeletionTimestamp == nil &&
				p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
			n := 0
			for _, a := range js.active {
				if a {
					n++
				}
			}
			js.maxActive = max(js.maxActive, n)
			if p.Status.Phase == corev1.PodSucceeded && !js.succeeded[p.Name] {
				js.succeeded[p.Name] = true
				js.indexes[p.Annotations[batchv1.JobCompletionIndexAnnotation]]++
			}
		}
	}
	for _, js := range jobs {
		par := int32(1)
		if js.final.Spec.Parallelism != nil {
			par = *js.final.Spec.Parallelism
		}
		comp := int32(1)
		if js.final.Spec.Completions != nil {
			comp = *js.final.Spec.Completions
		}
		if js.maxActive > int(par) {
			problems = append(problems, fmt.Sprintf("job %s had %d active pods at once, parallelism %d", js.name, js.maxActive, par))
		}
		if !jobComplete(js.final) {
			continue // a CronJob's Job of the last minute may still run
		}
		if len(js.succeeded) != int(comp) || js.final.Status.Succeeded != comp {
			problems = append(problems, fmt.Sprintf("job %s: %d pods succeeded, status.succeeded %d, completions %d",
				js.name, len(js.succeeded), js.final.Status.Succeeded, comp))
		}
		if js.indexed {
			for ix, n := range js.indexes {
				if n != 1 {
					problems = append(problems, fmt.Sprintf("job %s: index %s succeeded %d times", js.name, ix, n))
				}
			}
		}
		if js.createdNoCause > 0 {
			problems = append(problems, fmt.Sprintf("job %s: %d pods created without a cause", js.name, js.createdNoCause))
		}
	}
	for at, n := range fired {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("cronjob minutely fired %d times for %s", n, at))
		}
	}
	if len(fired) == 0 {
		problems = append(problems, "cronjob minutely never fired")
	}
	return problems, jobPods
}

func ptr[T any](v T) *T { return &v }
