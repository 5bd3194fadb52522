package images

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// CoreDNSVersion is the version of CoreDNS linked into cairn
// (github.com/coredns/coredns in go.mod; services/clusterdns checks it).
const CoreDNSVersion = "1.15.0"

// CoreDNSRef is the cluster DNS image: the cairn binary, whose `cairn
// coredns` subcommand is CoreDNS (services/clusterdns).
const CoreDNSRef = "cairn.local/coredns:" + CoreDNSVersion

// libDirs are where the dynamic libraries a binary needs are looked for,
// as ld.so's default path on Debian.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu", "/lib64", "/lib", "/usr/lib64", "/usr/lib"}

// binaryEntries are the layer entries that run bin at /<name>: the binary
// and, if it is dynamically linked (cgo), its ELF interpreter and the
// libraries it names (DT_NEEDED) at their paths on this machine.
func binaryEntries(bin, name string) ([]entry, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("images: read %s: %w", bin, err)
	}
	entries := []entry{fileEntry(name, 0o755, data)}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("images: %s: %w", bin, err)
	}
	defer f.Close()
	var files []string
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return nil, fmt.Errorf("images: %s interpreter: %w", bin, err)
		}
		files = append(files, string(bytes.TrimRight(b, "\x00")))
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("images: %s libraries: %w", bin, err)
	}
	for _, lib := range libs {
		found := ""
		for _, d := range libDirs {
			if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
				found = filepath.Join(d, lib)
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("images: %s needs %s, not found in %v", bin, lib, libDirs)
		}
		files = append(files, found)
	}
	for _, p := range files {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		b, err := os.ReadFile(real)
		if err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		entries = append(entries, fileEntry(p, 0o755, b))
	}
	return entries, nil
}

// coredns is the image of CoreDNSRef from the binary bin: entrypoint
// `/cairn coredns`, default arguments `-conf /etc/coredns/Corefile` (the
// Deployment's, as kubeadm's). Its one layer is not compressed: it is
// imported into the node's containerd, never pulled, and gzip of a binary
// of 150 MB would cost every start seconds.
func coredns(bin string) (v1.Image, error) {
	entries, err := binaryEntries(bin, "cairn")
	if err != nil {
		return nil, err
	}
	entries = append(entries,
		dirEntry("etc/coredns", 0o755),
		dirEntry("tmp", 0o1777),
		fileEntry("etc/passwd", 0o644, []byte(passwd)),
		fileEntry("etc/group", 0o644, []byte(group)),
		fileEntry("etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n")))
	raw, err := layerTar(entries)
	if err != nil {
		return nil, err
	}
	// A static layer stores the tar as it is (tarball.LayerFromOpener
	// would gzip it under the uncompressed media type).
	layer := static.NewLayer(raw, types.OCIUncompressedLayer)
	return configure(layer, v1.Config{
		Entrypoint:   []string{"/cairn", "coredns"},
		Cmd:          []string{"-conf", "/etc/coredns/Corefile"},
		ExposedPorts: map[string]struct{}{"53/udp": {}, "53/tcp": {}, "9153/tcp": {}},
	}, "cairn coredns (CoreDNS "+CoreDNSVersion+")")
}

// configure makes a one-layer OCI image of layer with the runtime config.
func configure(layer v1.Layer, cfg v1.Config, createdBy string) (v1.Image, error) {
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: createdBy},
	})
	if err != nil {
		return nil, fmt.Errorf("images: append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("images: config: %w", err)
	}
	cf = cf.DeepCopy()
	p := platform()
	cf.OS, cf.Architecture = p.OS, p.Architecture
	cf.Created = v1.Time{Time: Epoch}
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("images: config: %w", err)
	}
	return img, nil
}
