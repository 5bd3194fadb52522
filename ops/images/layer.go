package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file of a layer; exactly one of the kinds applies.
type entry struct {
	path   string // relative, no leading slash
	mode   int64  // permission bits (and sticky)
	dir    bool
	link   string // symlink target
	data   []byte // regular file content
	uid    int
	gid    int
	isFile bool
}

func dirEntry(p string, mode int64) entry { return entry{path: p, mode: mode, dir: true} }
func fileEntry(p string, mode int64, data []byte) entry {
	return entry{path: p, mode: mode, data: data, isFile: true}
}
func linkEntry(p, target string) entry { return entry{path: p, mode: 0o777, link: target} }

// layerTar writes entries as a deterministic tar: sorted by path, parents
// implied as 0755 directories when not given, every time Epoch, owner 0:0.
func layerTar(entries []entry) ([]byte, error) {
	byPath := map[string]entry{}
	for _, e := range entries {
		e.path = strings.TrimPrefix(path.Clean(e.path), "/")
		byPath[e.path] = e
		for d := path.Dir(e.path); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = dirEntry(d, 0o755)
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := byPath[p]
		h := &tar.Header{
			Name:    p,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: Epoch,
			Format:  tar.FormatPAX,
		}
		switch {
		case e.dir:
			h.Typeflag = tar.TypeDir
			h.Name = p + "/"
		case e.link != "":
			h.Typeflag = tar.TypeSymlink
			h.Linkname = e.link
		case e.isFile:
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		default:
			return nil, fmt.Errorf("images: layer entry %q has no kind", p)
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("images: tar %s: %w", p, err)
		}
		if e.isFile {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("images: tar %s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("images: tar: %w", err)
	}
	return buf.Bytes(), nil
}

// gzipBytes compresses with an empty gzip header (no name, no time), so the
// output depends only on the input.
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newImage makes a one-layer OCI image of entries with the given runtime
// config.
func newImage(entries []entry, cfg v1.Config, createdBy string) (v1.Image, error) {
	raw, err := layerTar(entries)
	if err != nil {
		return nil, err
	}
	gz, err := gzipBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("images: gzip: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("images: layer: %w", err)
	}
	return configure(layer, cfg, createdBy)
}
