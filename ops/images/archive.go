package images

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotation keys of the index entry.
const (
	// AnnotationImageName is read by containerd's importers for the name.
	AnnotationImageName = "io.containerd.image.name"
	// AnnotationRefName is the OCI tag annotation.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// WriteArchive writes img as an OCI image-layout tarball named ref: the
// files oci-layout and index.json and the blobs (manifest, config, layers)
// under blobs/sha256. The output depends only on ref and the image.
func WriteArchive(w io.Writer, ref string, img v1.Image) error {
	manifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("images: manifest: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("images: digest: %w", err)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("images: config: %w", err)
	}
	configName, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("images: config digest: %w", err)
	}
	p := platform()
	tag := ref
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIManifestSchema1,
			Digest:    digest,
			Size:      int64(len(manifest)),
			Platform:  &p,
			Annotations: map[string]string{
				AnnotationImageName: ref,
				AnnotationRefName:   tag,
			},
		}},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return fmt.Errorf("images: index: %w", err)
	}

	tw := tar.NewWriter(w)
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: Epoch, Format: tar.FormatPAX})
	}
	file := func(name string, size int64, r io.Reader) error {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: Epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		n, err := io.Copy(tw, r)
		if err == nil && n != size {
			err = fmt.Errorf("%s: wrote %d of %d bytes", name, n, size)
		}
		return err
	}
	bytesFile := func(name string, b []byte) error {
		return file(name, int64(len(b)), strings.NewReader(string(b)))
	}
	if err := bytesFile("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return fmt.Errorf("images: archive: %w", err)
	}
	if err := bytesFile("index.json", indexJSON); err != nil {
		return fmt.Errorf("images: archive: %w", err)
	}
	if err := dir("blobs/"); err != nil {
		return fmt.Errorf("images: archive: %w", err)
	}
	if err := dir("blobs/sha256/"); err != nil {
		return fmt.Errorf("images: archive: %w", err)
	}
	if err := bytesFile("blobs/sha256/"+digest.Hex, manifest); err != nil {
		return fmt.Errorf("images: archive: %w", err)
	}
	if err := bytesFile("blobs/sha256/"+configName.Hex, config); err != nil {
		return fmt.Errorf("images: archive: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("images: layers: %w", err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("images: layer digest: %w", err)
		}
		size, err := l.Size()
		if err != nil {
			return fmt.Errorf("images: layer size: %w", err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("images: layer: %w", err)
		}
		err = file("blobs/sha256/"+d.Hex, size, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("images: archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("images: archive: %w", err)
	}
	return nil
}
