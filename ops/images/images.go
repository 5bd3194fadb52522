package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// References of the images Build produces.
const (
	BusyboxRef = "cairn.local/busybox:1.36"
	PauseRef   = "cairn.local/pause:3.10"
)

// Epoch is the modification and creation time of everything in the images.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Image is one built image.
type Image struct {
	// Ref is the full reference, e.g. cairn.local/busybox:1.36.
	Ref string
	// Archive is the path of the OCI image-layout tarball.
	Archive string
	// Digest is the manifest digest, "sha256:...".
	Digest string

	img v1.Image
}

// V1 returns the image as a go-containerregistry image (for [Push] or
// inspection).
func (i Image) V1() v1.Image { return i.img }

// Options says where Build finds its inputs. The zero value works on any
// machine with busybox-static installed: nothing is read from a source tree
// and no toolchain runs.
type Options struct {
	// Busybox is the static busybox binary; default /bin/busybox.
	Busybox string
	// PauseBinary, when set, is used as the pause program instead of the
	// built-in one (see [PauseProgram]).
	PauseBinary string
	// CoreDNS, when set, is a binary whose `coredns` subcommand is CoreDNS
	// (the cairn binary: `cairn up` passes its own executable), built into
	// [CoreDNSRef] with the dynamic libraries it needs; empty builds no
	// such image.
	CoreDNS string
}

// ErrNoBusybox means the busybox binary is missing (install busybox-static,
// ops/node-deps.sh does).
var ErrNoBusybox = errors.New("images: busybox binary not found")

// Build builds every image with the default Options into outDir (created if
// needed) and returns them, busybox first. See [Options.Build].
func Build(ctx context.Context, outDir string) ([]Image, error) {
	return Options{}.Build(ctx, outDir)
}

// Build builds the busybox and pause images (and with CoreDNS set the
// CoreDNS image) and writes their archives into outDir as busybox.tar and
// pause.tar (and coredns.tar). An archive whose bytes are unchanged
// is not rewritten. It is safe to call concurrently for different outDirs.
func (o Options) Build(ctx context.Context, outDir string) ([]Image, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	bb, err := o.busybox(ctx)
	if err != nil {
		return nil, err
	}
	pause, err := o.pause()
	if err != nil {
		return nil, err
	}
	out := []Image{
		{Ref: BusyboxRef, Archive: filepath.Join(outDir, "busybox.tar"), img: bb},
		{Ref: PauseRef, Archive: filepath.Join(outDir, "pause.tar"), img: pause},
	}
	if o.CoreDNS != "" {
		img, err := coredns(o.CoreDNS)
		if err != nil {
			return nil, err
		}
		out = append(out, Image{Ref: CoreDNSRef, Archive: filepath.Join(outDir, "coredns.tar"), img: img})
	}
	for i := range out {
		if err := out[i].write(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// write stores the archive of i unless the file already holds those bytes.
func (i *Image) write() error {
	d, err := i.img.Digest()
	if err != nil {
		return fmt.Errorf("images: digest %s: %w", i.Ref, err)
	}
	i.Digest = d.String()
	var buf bytes.Buffer
	if err := WriteArchive(&buf, i.Ref, i.img); err != nil {
		return err
	}
	if old, err := os.ReadFile(i.Archive); err == nil && bytes.Equal(old, buf.Bytes()) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(i.Archive), ".tmp-"+filepath.Base(i.Archive))
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("images: write %s: %w", i.Archive, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("images: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("images: write %s: %w", i.Archive, err)
	}
	if err := os.Rename(tmp.Name(), i.Archive); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	return nil
}

func platform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}
