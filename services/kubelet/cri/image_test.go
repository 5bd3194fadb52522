package cri_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
)

// TestImagePullPolicy: IfNotPresent and Never run the imported image
// without pulling; Never with a missing image waits in ErrImageNeverPull;
// Always pulls (from a registry on the node's loopback), and a pull that
// fails (no registry answers for cairn.invalid) reports ErrImagePull, then
// ImagePullBackOff. Each records the kubelet's events.
func TestImagePullPolicy(t *testing.T) {
	r := newRig(t, nil)
	pulled := r.serveImage("cairn/pulled:v1")
	mk := func(name, image string, policy corev1.PullPolicy) {
		r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: image, ImagePullPolicy: policy, Command: []string{"sleep", "3600"}}}}})
	}
	mk("present", busybox, corev1.PullIfNotPresent)
	mk("never", busybox, corev1.PullNever)
	mk("never-missing", "cairn.invalid/missing:1", corev1.PullNever)
	mk("always", pulled, corev1.PullAlways)
	// ErrImagePull lasts until the next sync within the back-off, too
	// short to be sure to see by polling on a loaded machine: watch every
	// status the kubelet writes instead.
	reasons := r.watchWaitingReasons("always-missing", "c")
	mk("always-missing", "cairn.invalid/missing:1", corev1.PullAlways)
	r.waitReady("present")
	r.waitReady("never")
	waiting := func(reason string) func(p *corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			w := status(p, "c").State.Waiting
			return w != nil && w.Reason == reason && p.Status.Phase == corev1.PodPending
		}
	}
	r.waitPod("never-missing", "ErrImageNeverPull", waiting("ErrImageNeverPull"))
	deadline := time.After(wait)
	var seen []string
	for !slices.Contains(seen, "ImagePullBackOff") {
		select {
		case reason := <-reasons:
			if len(seen) == 0 || seen[len(seen)-1] != reason {
				seen = append(seen, reason)
			}
		case <-deadline:
			t.Fatalf("always-missing: waiting reasons %v, want ErrImagePull then ImagePullBackOff", seen)
		}
	}
	if i := slices.Index(seen, "ErrImagePull"); i < 0 || i > slices.Index(seen, "ImagePullBackOff") {
		t.Errorf("always-missing: waiting reasons %v, want ErrImagePull before ImagePullBackOff", seen)
	}
	if p := r.get("always-missing"); p.Status.Phase != corev1.PodPending {
		t.Errorf("always-missing: phase %s, want Pending", p.Status.Phase)
	}
	r.waitReady("always")

	t.Run("events", func(t *testing.T) {
		const c = "spec.containers{c}"
		normal, warning := corev1.EventTypeNormal, corev1.EventTypeWarning
		r.containerEvent("present", c, normal, "Pulled", `Container image "`+busybox+`" already present on machine`)
		r.containerEvent("never", c, normal, "Pulled", `Container image "`+busybox+`" already present on machine`)
		r.containerEvent("never-missing", c, warning, "ErrImageNeverPull", `Container image "cairn.invalid/missing:1" is not present with pull policy of Never`)
		r.containerEvent("never-missing", c, warning, "Failed", "Error: ErrImageNeverPull")
		r.containerEvent("always-missing", c, normal, "Pulling", `Pulling image "cairn.invalid/missing:1"`)
		r.containerEvent("always-missing", c, warning, "Failed", `Failed to pull image "cairn.invalid/missing:1": `)
		r.containerEvent("always-missing", c, warning, "Failed", "Error: ErrImagePull")
		r.containerEvent("always-missing", c, normal, "BackOff", `Back-off pulling image "cairn.invalid/missing:1"`)
		r.containerEvent("always-missing", c, warning, "Failed", "Error: ImagePullBackOff")
		r.containerEvent("always", c, normal, "Pulling", fmt.Sprintf("Pulling image %q", pulled))
		ev := r.containerEvent("always", c, normal, "Pulled", fmt.Sprintf("Successfully pulled image %q in ", pulled))
		msg := regexp.MustCompile(`^Successfully pulled image "[^"]+" in [0-9.]+m?s \([0-9.]+m?s including waiting\)\. Image size: [1-9][0-9]* bytes\.$`)
		if !msg.MatchString(ev.Message) {
			t.Errorf("Pulled event: %q", ev.Message)
		}
	})
}

// serveImage runs a registry on the node's loopback (where containerd
// reaches it over plain http), pushes the busybox image to it as name and
// returns the image's reference.
func (r *rig) serveImage(name string) string {
	r.t.Helper()
	ctx := context.Background()
	ln, err := r.node.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatalf("listen in the node namespace: %v", err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go srv.Serve(ln)
	r.t.Cleanup(func() { srv.Close() })
	host := ln.Addr().String()
	if err := r.node.AddRegistry(host); err != nil {
		r.t.Fatal(err)
	}
	tr := &http.Transport{DialContext: r.node.DialContext}
	r.t.Cleanup(tr.CloseIdleConnections)
	ref := host + "/" + name
	if err := images.Push(ctx, nodetest.Images(r.t)[0], ref, remote.WithTransport(tr)); err != nil {
		r.t.Fatalf("push: %v", err)
	}
	return ref
}

// watchWaitingReasons watches the pod called name, from before it exists,
// and sends the waiting reason of its container cname in every version of
// it, until the test ends.
func (r *rig) watchWaitingReasons(name, cname string) <-chan string {
	r.t.Helper()
	pods := r.env.Client.CoreV1().Pods("default")
	list, err := pods.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		r.t.Fatal(err)
	}
	out := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ws := status(p, cname).State.Waiting; ws != nil {
				select {
				case out <- ws.Reason:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	r.t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return out
}
