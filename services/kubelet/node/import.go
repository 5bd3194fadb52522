package node

import (
	"context"
	"fmt"
	"os"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/ops/images"
)

// Containerd returns a containerd client on the node's socket with the CRI
// namespace (k8s.io) as default; the caller closes it.
func (r *Runtime) Containerd() (*containerd.Client, error) {
	c, err := containerd.New(r.l.sock, containerd.WithDefaultNamespace(Namespace), containerd.WithTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("node: containerd client: %w", err)
	}
	return c, nil
}

// Import imports OCI archives into the k8s.io namespace, unpacks them for
// the node's snapshotter and waits until the CRI image service lists each
// of them. Re-importing an unchanged archive is a no-op.
func (r *Runtime) Import(ctx context.Context, archives ...string) error {
	c, err := r.Containerd()
	if err != nil {
		return err
	}
	defer c.Close()
	var refs []string
	for _, path := range archives {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("node: import: %w", err)
		}
		imgs, err := c.Import(ctx, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("node: import %s: %w", path, err)
		}
		if len(imgs) == 0 {
			return fmt.Errorf("node: import %s: no named image in the archive", path)
		}
		for _, img := range imgs {
			if err := containerd.NewImage(c, img).Unpack(ctx, r.snapshotter); err != nil {
				return fmt.Errorf("node: unpack %s: %w", img.Name, err)
			}
			refs = append(refs, img.Name)
		}
	}
	// The CRI image cache follows containerd's image events asynchronously.
	is := r.ImageService()
	for _, ref := range refs {
		for {
			st, err := is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			if err == nil && st.GetImage() != nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("node: %s imported but not listed by the CRI: %w (%v)", ref, ctx.Err(), err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

func (r *Runtime) importImages(ctx context.Context, imgs []images.Image) error {
	paths := make([]string, 0, len(imgs))
	for _, img := range imgs {
		paths = append(paths, img.Archive)
	}
	return r.Import(ctx, paths...)
}
