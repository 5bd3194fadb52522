package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/kubelet/node"
)

// A node for `cairn up`: images built once into the data directory, a
// named network namespace owned by the node, CRI clients for the kubelet
// and an HTTP client that reaches pod IPs.
func Example() {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	imgs, err := images.Build(ctx, ".cairn/images")
	if err != nil {
		log.Error("images", "err", err)
		return
	}
	rt, err := node.Start(ctx, node.Config{
		Dir:         ".cairn/node",
		NetNS:       "cairn-n1",
		CreateNetNS: true,
		PodCIDR:     "10.244.0.0/24", // the Node's spec.podCIDR
		Images:      imgs,
	}, log)
	if err != nil {
		log.Error("node", "err", err)
		return
	}
	defer rt.Stop(ctx)

	v, err := rt.RuntimeService().Version(ctx, &runtimeapi.VersionRequest{})
	if err == nil {
		fmt.Println(v.RuntimeName, rt.Endpoint(), rt.CgroupParent())
	}
	probe := &http.Client{Transport: &http.Transport{DialContext: rt.DialContext}}
	_ = probe // probe.Get("http://<pod IP>:8080/") for httpGet probes
}
