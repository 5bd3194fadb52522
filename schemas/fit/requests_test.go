package fit

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func container(cpu, mem string) corev1.Container {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return corev1.Container{Resources: corev1.ResourceRequirements{Requests: l}}
}

func sidecar(cpu, mem string) corev1.Container {
	c := container(cpu, mem)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

// scoring is the NonMissing of the scheduler's scoring.
var scoring = Options{NonMissing: Resources{MilliCPU: 100, Memory: 200 << 20}}

func TestPodRequests(t *testing.T) {
	tests := []struct {
		name string
		spec corev1.PodSpec
		opts Options
		want Resources
	}{
		{"none", corev1.PodSpec{Containers: []corev1.Container{{}}}, Options{}, Resources{}},
		{"sum of containers", corev1.PodSpec{Containers: []corev1.Container{container("100m", "1Mi"), container("250m", "2Mi")}},
			Options{}, Resources{MilliCPU: 350, Memory: 3 << 20}},
		{"init container larger", corev1.PodSpec{InitContainers: []corev1.Container{container("1", "1Mi")},
			Containers: []corev1.Container{container("100m", "4Mi")}}, Options{}, Resources{MilliCPU: 1000, Memory: 4 << 20}},
		{"largest init container", corev1.PodSpec{InitContainers: []corev1.Container{container("4", ""), container("2", "")},
			Containers: []corev1.Container{container("1", "")}}, Options{}, Resources{MilliCPU: 4000}},
		{"sidecar adds and counts under later inits", corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar("200m", "1Mi"), container("500m", "1Mi")},
			Containers:     []corev1.Container{container("100m", "1Mi")}}, Options{}, Resources{MilliCPU: 700, Memory: 2 << 20}},
		{"init before the sidecar does not count it", corev1.PodSpec{
			InitContainers: []corev1.Container{container("500m", ""), sidecar("200m", "")},
			Containers:     []corev1.Container{container("100m", "")}}, Options{}, Resources{MilliCPU: 500}},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{container("100m", "1Mi")},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}, Options{}, Resources{MilliCPU: 150, Memory: 1 << 20}},
		{"ephemeral storage", corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}}}}}, Options{}, Resources{EphemeralStorage: 1 << 30}},
		{"other resources are not accounted", corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			"example.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("1")}}}}}, Options{}, Resources{MilliCPU: 1000}},
		{"pod-level requests replace the containers'", corev1.PodSpec{Containers: []corev1.Container{container("100m", "1Mi"), container("100m", "1Mi")},
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			Overhead:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}, Options{}, Resources{MilliCPU: 1050, Memory: 2 << 20}},
		{"pod-level limits only change nothing", corev1.PodSpec{Containers: []corev1.Container{container("100m", "")},
			Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}, Options{}, Resources{MilliCPU: 100}},

		// The scheduler's scoring: missing cpu and memory requests count
		// as 100m and 200Mi, per container.
		{"non-missing: containers sum", corev1.PodSpec{Containers: []corev1.Container{container("1", ""), container("2", "")}},
			scoring, Resources{MilliCPU: 3000, Memory: 2 * 200 << 20}},
		{"non-missing: init max", corev1.PodSpec{Containers: []corev1.Container{container("1", "")},
			InitContainers: []corev1.Container{container("4", ""), container("2", "")}}, scoring, Resources{MilliCPU: 4000, Memory: 200 << 20}},
		{"non-missing: sidecar adds", corev1.PodSpec{Containers: []corev1.Container{container("1", "")},
			InitContainers: []corev1.Container{sidecar("500m", "")}}, scoring, Resources{MilliCPU: 1500, Memory: 2 * 200 << 20}},
		{"non-missing: overhead adds", corev1.PodSpec{Containers: []corev1.Container{container("1", "")},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}, scoring, Resources{MilliCPU: 1250, Memory: 200 << 20}},
		{"non-missing: an explicit 0 stays 0", corev1.PodSpec{Containers: []corev1.Container{container("0", "0")}},
			scoring, Resources{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodRequests(&corev1.Pod{Spec: tt.spec}, tt.opts); got != tt.want {
				t.Errorf("PodRequests = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzPodRequests: whatever the quantities, the request of a pod without
// pod-level requests covers each of its containers and the sum of its app
// containers, and never shrinks when a container is added.
func FuzzPodRequests(f *testing.F) {
	f.Add("100m", "1Mi", "1", "2Gi", "500m", false)
	f.Add("0", "0", "0", "0", "0", true)
	f.Add("1.5", "1e3", "7k", "3Ki", "250m", true)
	f.Fuzz(func(t *testing.T, cpu1, mem1, cpu2, mem2, cpu3 string, restartable bool) {
		parse := func(cpu, mem string) (corev1.Container, bool) {
			l := corev1.ResourceList{}
			for name, s := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem} {
				q, err := resource.ParseQuantity(s)
				if err != nil || q.Sign() < 0 || q.Value() > 1<<50 {
					return corev1.Container{}, false // validation refuses these
				}
				l[name] = q
			}
			return corev1.Container{Resources: corev1.ResourceRequirements{Requests: l}}, true
		}
		app, ok1 := parse(cpu1, mem1)
		init, ok2 := parse(cpu2, mem2)
		app2, ok3 := parse(cpu3, "0")
		if !ok1 || !ok2 || !ok3 {
			t.Skip()
		}
		if restartable {
			always := corev1.ContainerRestartPolicyAlways
			init.RestartPolicy = &always
		}
		pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{app}, InitContainers: []corev1.Container{init}}}
		got := PodRequests(pod, Options{})
		covers := func(r Resources) bool {
			return got.MilliCPU >= r.MilliCPU && got.Memory >= r.Memory && got.EphemeralStorage >= r.EphemeralStorage
		}
		if a, i := FromList(app.Resources.Requests), FromList(init.Resources.Requests); !covers(a) || !covers(i) {
			t.Fatalf("PodRequests = %+v, below a container (%+v, %+v)", got, a, i)
		}
		pod.Spec.Containers = append(pod.Spec.Containers, app2)
		more := PodRequests(pod, Options{})
		if more.MilliCPU < got.MilliCPU || more.Memory < got.Memory {
			t.Fatalf("adding a container shrank the request: %+v -> %+v", got, more)
		}
	})
}
