package images_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cairn-dev/cairn/ops/images"
)

func build(t *testing.T, dir string) []images.Image {
	t.Helper()
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("needs /bin/busybox from busybox-static (run ops/node-deps.sh)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	imgs, err := images.Build(ctx, dir)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return imgs
}

func TestBuildIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	first := build(t, dir)
	if len(first) != 2 || first[0].Ref != images.BusyboxRef || first[1].Ref != images.PauseRef {
		t.Fatalf("Build returned %+v, want busybox then pause", first)
	}
	stat := map[string]time.Time{}
	content := map[string][]byte{}
	for _, img := range first {
		fi, err := os.Stat(img.Archive)
		if err != nil {
			t.Fatal(err)
		}
		stat[img.Archive] = fi.ModTime()
		content[img.Archive], _ = os.ReadFile(img.Archive)
	}
	time.Sleep(20 * time.Millisecond)

	other := t.TempDir()
	second := build(t, dir)
	third := build(t, other)
	for i := range first {
		if second[i].Digest != first[i].Digest || third[i].Digest != first[i].Digest {
			t.Errorf("%s: digests %s, %s, %s differ between builds", first[i].Ref, first[i].Digest, second[i].Digest, third[i].Digest)
		}
		fi, err := os.Stat(second[i].Archive)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(stat[second[i].Archive]) {
			t.Errorf("%s: archive rewritten by an identical rebuild", second[i].Ref)
		}
		b, _ := os.ReadFile(third[i].Archive)
		if !bytes.Equal(b, content[first[i].Archive]) {
			t.Errorf("%s: archives of two builds differ", first[i].Ref)
		}
	}
}

// readArchive returns the files of an archive by name.
func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			files[h.Name], _ = io.ReadAll(tr)
		}
	}
}

func TestArchiveIsOCILayout(t *testing.T) {
	for _, img := range build(t, t.TempDir()) {
		t.Run(img.Ref, func(t *testing.T) {
			files := readArchive(t, img.Archive)
			if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
				t.Errorf("oci-layout = %q", got)
			}
			for name, b := range files {
				if hexd, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
					sum := sha256.Sum256(b)
					if hex.EncodeToString(sum[:]) != hexd {
						t.Errorf("blob %s has digest %x", name, sum)
					}
				}
			}
			var index v1.IndexManifest
			if err := json.Unmarshal(files["index.json"], &index); err != nil {
				t.Fatalf("index.json: %v", err)
			}
			if len(index.Manifests) != 1 {
				t.Fatalf("index has %d manifests, want 1", len(index.Manifests))
			}
			d := index.Manifests[0]
			if d.Digest.String() != img.Digest || d.Annotations[images.AnnotationImageName] != img.Ref {
				t.Errorf("index entry %+v, want digest %s named %s", d, img.Digest, img.Ref)
			}
			var m v1.Manifest
			if err := json.Unmarshal(files["blobs/sha256/"+d.Digest.Hex], &m); err != nil {
				t.Fatalf("manifest: %v", err)
			}
			if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || len(m.Layers) != 1 {
				t.Errorf("manifest %+v: want an OCI manifest with one layer", m)
			}
			for _, blob := range append([]v1.Descriptor{m.Config}, m.Layers...) {
				if b, ok := files["blobs/sha256/"+blob.Digest.Hex]; !ok || int64(len(b)) != blob.Size {
					t.Errorf("blob %s (size %d) missing or of another size", blob.Digest, blob.Size)
				}
			}
			var cfg v1.ConfigFile
			if err := json.Unmarshal(files["blobs/sha256/"+m.Config.Digest.Hex], &cfg); err != nil {
				t.Fatalf("config: %v", err)
			}
			if cfg.OS != "linux" || len(cfg.RootFS.DiffIDs) != 1 || !cfg.Created.Time.Equal(images.Epoch) {
				t.Errorf("config %+v: want linux, one diff id, created at Epoch", cfg)
			}
		})
	}
}

// layerFiles returns the headers and file contents of an image's one layer.
func layerFiles(t *testing.T, img images.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	layers, err := img.V1().Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v (%d)", err, len(layers))
	}
	zr, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	headers := map[string]*tar.Header{}
	data := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return headers, data
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		headers[name] = h
		data[name], _ = io.ReadAll(tr)
		if !h.ModTime.Equal(images.Epoch) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v owner %d:%d, want Epoch and 0:0", h.Name, h.ModTime, h.Uid, h.Gid)
		}
	}
}

func TestBusyboxLayer(t *testing.T) {
	imgs := build(t, t.TempDir())
	headers, data := layerFiles(t, imgs[0])
	tests := []struct {
		path string
		typ  byte
		link string
		mode int64
	}{
		{path: "bin/busybox", typ: tar.TypeReg, mode: 0o755},
		{path: "bin/sh", typ: tar.TypeSymlink, link: "/bin/busybox"},
		{path: "bin/sleep", typ: tar.TypeSymlink, link: "/bin/busybox"},
		{path: "bin/cat", typ: tar.TypeSymlink, link: "/bin/busybox"},
		{path: "bin/echo", typ: tar.TypeSymlink, link: "/bin/busybox"},
		{path: "bin/ls", typ: tar.TypeSymlink, link: "/bin/busybox"},
		{path: "bin/hostname", typ: tar.TypeSymlink, link: "/bin/busybox"},
		{path: "usr/sbin/httpd", typ: tar.TypeSymlink, link: "/bin/busybox"},
		{path: "usr/bin/wget", typ: tar.TypeSymlink, link: "/bin/busybox"},
		{path: "usr/bin/nc", typ: tar.TypeSymlink, link: "/bin/busybox"},
		{path: "tmp", typ: tar.TypeDir, mode: 0o1777},
		{path: "var/www", typ: tar.TypeDir, mode: 0o755},
		{path: "etc/passwd", typ: tar.TypeReg, mode: 0o644},
	}
	for _, tt := range tests {
		h, ok := headers[tt.path]
		if !ok {
			t.Errorf("%s: missing from the layer", tt.path)
			continue
		}
		if h.Typeflag != tt.typ || h.Linkname != tt.link || (tt.mode != 0 && h.Mode != tt.mode) {
			t.Errorf("%s: type %c link %q mode %o, want %c %q %o", tt.path, h.Typeflag, h.Linkname, h.Mode, tt.typ, tt.link, tt.mode)
		}
	}
	if !strings.HasPrefix(string(data["etc/passwd"]), "root:x:0:0:") {
		t.Errorf("etc/passwd = %q, want a root entry first", data["etc/passwd"])
	}
	cfg, err := imgs[0].V1().ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Config.Env) == 0 || !strings.HasPrefix(cfg.Config.Env[0], "PATH=") {
		t.Errorf("busybox config env %v, want PATH", cfg.Config.Env)
	}
}

func TestPauseImage(t *testing.T) {
	imgs := build(t, t.TempDir())
	headers, data := layerFiles(t, imgs[1])
	h, ok := headers["pause"]
	if !ok || h.Mode != 0o755 || !bytes.HasPrefix(data["pause"], []byte("\x7fELF")) {
		t.Fatalf("pause image lacks an executable /pause ELF binary: %+v", h)
	}
	for _, dir := range []string{"dev", "proc", "sys"} {
		if h, ok := headers[dir]; !ok || h.Typeflag != tar.TypeDir {
			t.Errorf("pause image lacks the mount point /%s: %+v", dir, h)
		}
	}
	cfg, err := imgs[1].V1().ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Entrypoint; len(got) != 1 || got[0] != "/pause" {
		t.Errorf("entrypoint %v, want [/pause]", got)
	}
}

func TestPushToLoopbackRegistry(t *testing.T) {
	imgs := build(t, t.TempDir())
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	for _, img := range imgs {
		ref := host + "/cairn/" + strings.TrimPrefix(img.Ref, "cairn.local/")
		if err := images.Push(ctx, img, ref); err != nil {
			t.Fatalf("Push %s: %v", ref, err)
		}
		r, err := name.ParseReference(ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(r, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("HEAD %s: %v", ref, err)
		}
		if desc.Digest.String() != img.Digest {
			t.Errorf("registry has %s at %s, pushed %s", desc.Digest, ref, img.Digest)
		}
	}
}

func TestBuildFailsWithoutBusybox(t *testing.T) {
	_, err := images.Options{Busybox: filepath.Join(t.TempDir(), "none")}.Build(context.Background(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "busybox") {
		t.Fatalf("Build with a missing busybox: %v, want ErrNoBusybox", err)
	}
}

// TestBuildSidecarInjector builds the example's image from a stand-in
// binary: one archive, named, deterministic.
func TestBuildSidecarInjector(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("\x7fELF stand-in"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := images.BuildSidecarInjector(bin, filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := images.BuildSidecarInjector(bin, filepath.Join(dir, "out2"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Ref != images.SidecarInjectorRef || a.Digest == "" || a.Digest != b.Digest {
		t.Errorf("images %+v %+v", a, b)
	}
	cfg, err := a.V1().ConfigFile()
	if err != nil || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/sidecar-injector" {
		t.Errorf("config %+v %v", cfg, err)
	}
}
