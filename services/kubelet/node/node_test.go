package node_test

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
)

func TestStartServesCRI(t *testing.T) {
	rt := nodetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := rt.RuntimeService().Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	t.Logf("runtime %s %s, snapshotter %s, socket %s", v.RuntimeName, v.RuntimeVersion, rt.Snapshotter(), rt.Socket())
	list, err := rt.ImageService().ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range list.Images {
		t.Logf("image %v %s", img.RepoTags, img.Id)
	}
}
