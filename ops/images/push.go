package images

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push writes img to a registry under ref (e.g. "127.0.0.1:5000/busybox:1.36"),
// over plain http when the registry is not TLS (name.Insecure). opts are
// passed to remote.Write; add remote.WithTransport to reach a registry in
// another network namespace.
func Push(ctx context.Context, img Image, ref string, opts ...remote.Option) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return fmt.Errorf("images: push: %w", err)
	}
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	if err := remote.Write(r, img.img, opts...); err != nil {
		return fmt.Errorf("images: push %s: %w", ref, err)
	}
	return nil
}
