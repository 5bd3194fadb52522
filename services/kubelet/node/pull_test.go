package node_test

import (
	"io"
	"log"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
)

// TestPullImageFromLoopbackRegistry serves a registry on the node
// namespace's 127.0.0.1 (where containerd can reach it), pushes the busybox
// image there under a new name, pulls it through CRI PullImage over plain
// http and runs a container from the pulled image.
func TestPullImageFromLoopbackRegistry(t *testing.T) {
	rt := nodetest.Start(t)
	ctx := ctxT(t, 2*time.Minute)

	ln, err := rt.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen in the node namespace: %v", err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	host := ln.Addr().String()
	if err := rt.AddRegistry(host); err != nil {
		t.Fatal(err)
	}

	busybox := nodetest.Images(t)[0]
	ref := host + "/cairn/pulled:v1"
	tr := &http.Transport{DialContext: rt.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	push := remote.WithTransport(tr)
	if err := images.Push(ctx, busybox, ref, push); err != nil {
		t.Fatalf("push: %v", err)
	}

	is := rt.ImageService()
	if st, err := is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil || st.Image != nil {
		t.Fatalf("before the pull, ImageStatus(%s) = %v, %v; want absent", ref, st.GetImage(), err)
	}
	pulled, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("PullImage %s: %v", ref, err)
	}
	st, err := is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil || st.Image == nil {
		t.Fatalf("after the pull, ImageStatus(%s) = %v, %v", ref, st.GetImage(), err)
	}
	cfgName, err := busybox.V1().ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if pulled.ImageRef != cfgName.String() || st.Image.Id != cfgName.String() {
		t.Errorf("pulled image id %s (status %s), want the pushed config %s", pulled.ImageRef, st.Image.Id, cfgName)
	}
	wantDigest := strings.SplitN(ref, ":", 2)[0]
	found := false
	for _, d := range st.Image.RepoDigests {
		if strings.HasSuffix(d, "@"+busybox.Digest) && strings.HasPrefix(d, host) {
			found = true
		}
	}
	if !found {
		t.Errorf("repo digests %v, want %s@%s", st.Image.RepoDigests, wantDigest, busybox.Digest)
	}

	p := runPod(ctx, t, rt, podSpec{name: "pulled", image: ref, command: []string{"sleep", "3600"}})
	if got := strings.TrimSpace(exec(ctx, t, rt, p, "echo", "from the pulled image")); got != "from the pulled image" {
		t.Errorf("exec in a container of the pulled image: %q", got)
	}
}
