package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// pausePkg is the pause program, relative to the module root.
const pausePkg = "./ops/images/pause"

func (o Options) pause(ctx context.Context) (v1.Image, error) {
	bin := o.PauseBinary
	if bin == "" {
		dir, err := os.MkdirTemp("", "cairn-pause-")
		if err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "pause")
		if err := o.buildPause(ctx, bin); err != nil {
			return nil, err
		}
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("images: read pause: %w", err)
	}
	return newImage([]entry{fileEntry("pause", 0o755, data)}, v1.Config{
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
		WorkingDir: "/",
	}, "cairn ops/images: pause")
}

// buildPause compiles ./ops/images/pause statically and reproducibly.
func (o Options) buildPause(ctx context.Context, out string) error {
	goTool := o.Go
	if goTool == "" {
		goTool = "go"
	}
	modDir := o.ModuleDir
	if modDir == "" {
		gomod, err := exec.CommandContext(ctx, goTool, "env", "GOMOD").Output()
		if err != nil {
			return fmt.Errorf("images: go env GOMOD: %w", err)
		}
		p := strings.TrimSpace(string(gomod))
		if p == "" || p == os.DevNull {
			return fmt.Errorf("images: not inside the cairn module; set Options.ModuleDir")
		}
		modDir = filepath.Dir(p)
	}
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w -buildid=", "-o", out, pausePkg)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("images: go build %s: %w: %s", pausePkg, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
