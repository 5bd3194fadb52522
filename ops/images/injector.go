package images

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SidecarInjectorRef is the image of cairn's second example, the admission
// webhook of ops/examples/sidecar-injector.
const SidecarInjectorRef = "cairn.local/sidecar-injector:1"

// BuildSidecarInjector writes the image of the sidecar injector into
// outDir/sidecar-injector.tar: binary (the example compiled as a static
// program, CGO_ENABLED=0; `go tool task example:sidecar-injector` builds
// it) as /sidecar-injector, its entrypoint. Unlike busybox and pause this
// image needs cairn's source tree and a Go toolchain, so nodes do not
// build it themselves: the task imports it into the node's containerd.
// The same binary gives the same archive.
func BuildSidecarInjector(binary, outDir string) (Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return Image{}, fmt.Errorf("images: read sidecar injector: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return Image{}, fmt.Errorf("images: %w", err)
	}
	img, err := newImage([]entry{
		fileEntry("sidecar-injector", 0o755, data),
		dirEntry("tmp", 0o1777),
		fileEntry("etc/passwd", 0o644, []byte(passwd)),
		fileEntry("etc/group", 0o644, []byte(group)),
	}, v1.Config{
		Entrypoint: []string{"/sidecar-injector"},
		Cmd:        []string{"serve"},
		WorkingDir: "/",
	}, "cairn ops/images: ops/examples/sidecar-injector")
	if err != nil {
		return Image{}, err
	}
	out := Image{Ref: SidecarInjectorRef, Archive: filepath.Join(outDir, "sidecar-injector.tar"), img: img}
	if err := out.write(); err != nil {
		return Image{}, err
	}
	return out, nil
}
