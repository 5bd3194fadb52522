package cri_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestPodRuns runs one pod that uses every container and volume feature
// and checks each inside the real container.
func TestPodRuns(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	hostDir := t.TempDir()
	os.WriteFile(filepath.Join(hostDir, "host.txt"), []byte("from-host"), 0o644)
	_, err := r.env.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"color": "blue", "file.txt": "cm-file"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.env.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Data: map[string][]byte{"password": []byte("hunter2")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := r.create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "full", Labels: map[string]string{"app": "full"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:       "main",
				Command:    []string{"sh", "-c"},
				Args:       []string{"echo started $(GREETING); exec sleep 3600"},
				WorkingDir: "/tmp",
				Ports:      []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env: []corev1.EnvVar{
					{Name: "GREETING", Value: "hello"},
					{Name: "COLOR", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "color"}}},
					{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "password"}}},
					{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
				},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "scratch", MountPath: "/scratch"},
					{Name: "cfg", MountPath: "/etc/cfg"},
					{Name: "secret", MountPath: "/etc/secret", ReadOnly: true},
					{Name: "host", MountPath: "/host"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec",
					Items: []corev1.KeyToPath{{Key: "password", Path: "pw"}}, DefaultMode: ptr.To(int32(0o400))}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir}}},
			},
		},
	})
	// A pod whose configMap volume cannot be set up never starts.
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nocm"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Command: []string{"sleep", "3600"}}},
		Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}}}},
	}})
	p = r.waitReady("full")

	// Status as Kubernetes shows it.
	cs := status(p, "main")
	prefix, _ := netip.ParsePrefix(r.node.PodCIDR())
	ip, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil || !prefix.Contains(ip) {
		t.Errorf("podIP %q not in %s", p.Status.PodIP, prefix)
	}
	if p.Status.HostIP != r.node.Gateway().String() || p.Status.StartTime == nil {
		t.Errorf("hostIP %q startTime %v", p.Status.HostIP, p.Status.StartTime)
	}
	if !strings.HasPrefix(cs.ContainerID, "containerd://") || cs.ImageID == "" || cs.RestartCount != 0 ||
		cs.State.Running == nil || !cs.Ready || !ptr.Deref(cs.Started, false) {
		t.Errorf("container status: %+v", cs)
	}
	// The container really runs in containerd.
	if got := r.criContainers(string(p.UID)); len(got) != 1 || got[0].State.String() != "CONTAINER_RUNNING" {
		t.Fatalf("CRI containers: %v", got)
	}

	checks := []struct{ name, cmd, want string }{
		{"env", "echo $GREETING $COLOR $PASSWORD $NODE $POD_NAME $APP", "hello blue hunter2 n1 full full"},
		{"workingDir", "readlink /proc/1/cwd", "/tmp"},
		{"emptyDir writable", "echo x > /scratch/f && cat /scratch/f", "x"},
		{"configMap file", "cat /etc/cfg/file.txt", "cm-file"},
		{"secret item", "cat /etc/secret/pw", "hunter2"},
		{"secret mode", "stat -c %a /etc/secret/pw", "400"},
		{"secret read-only", "touch /etc/secret/x 2>/dev/null && echo rw || echo ro", "ro"},
		{"hostPath", "cat /host/host.txt", "from-host"},
		{"memory limit", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes", "67108864"},
		{"cpu quota", "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us", "50000"},
		{"cpu shares", "cat /sys/fs/cgroup/cpu/cpu.shares", "512"},
		{"hostname", "hostname", "full"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if got := strings.TrimSpace(r.exec(p, "main", "sh", "-c", c.cmd)); got != strings.TrimSpace(c.want) {
				t.Errorf("%s: got %q, want %q", c.cmd, got, c.want)
			}
		})
	}
	if log := r.readLog(p, "main", 0); !strings.Contains(log, " stdout F started hello") {
		t.Errorf("log file: %q", log)
	}

	t.Run("events", func(t *testing.T) {
		const main = "spec.containers{main}"
		r.containerEvent("full", main, corev1.EventTypeNormal, "Pulled", `Container image "`+busybox+`" already present on machine`)
		r.containerEvent("full", main, corev1.EventTypeNormal, "Created", "Created container: main")
		started := r.containerEvent("full", main, corev1.EventTypeNormal, "Started", "Started container main")
		if started.Message != "Started container main" || started.Count != 1 || started.InvolvedObject.Name != "full" ||
			started.InvolvedObject.Namespace != "default" || started.InvolvedObject.UID != p.UID || !started.EventTime.IsZero() {
			t.Errorf("Started event: %+v", started)
		}
		// The event's create carries the cause of the sync that started
		// the container: the pod's creation.
		created, logged := r.firstLogged("pods", "default", "full"), r.firstLogged("events", "default", started.Name)
		if logged.CausationID != created.ID || logged.CorrelationID != created.CorrelationID {
			t.Errorf("Started event's create: causation %q correlation %q, want %q %q", logged.CausationID, logged.CorrelationID, created.ID, created.CorrelationID)
		}
		fm := r.waitEvent("default", "nocm", "FailedMount", `MountVolume.SetUp failed for volume "cfg" : configmap "absent"`)
		if fm.Type != corev1.EventTypeWarning || fm.InvolvedObject.FieldPath != "" {
			t.Errorf("FailedMount event: %+v", fm)
		}
		for reason, msg := range map[string]string{"Starting": "Starting kubelet.", "NodeReady": "Node n1 status is now: NodeReady"} {
			ev := r.waitEvent(metav1.NamespaceDefault, "n1", reason, msg)
			if ev.Type != corev1.EventTypeNormal || ev.InvolvedObject != (corev1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"}) {
				t.Errorf("%s event: %s about %+v", reason, ev.Type, ev.InvolvedObject)
			}
		}
	})
}
