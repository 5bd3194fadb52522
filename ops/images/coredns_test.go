package images_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cairn-dev/cairn/ops/images"
)

// TestCoreDNSImage builds the CoreDNS image from a dynamically linked
// binary of this machine (/bin/ls stands in for cairn): the binary is
// /cairn, its ELF interpreter and libc are at their paths, the layer is an
// uncompressed tar, the entrypoint is `/cairn coredns`. A second build is
// byte for byte the same.
func TestCoreDNSImage(t *testing.T) {
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("needs /bin/busybox from busybox-static (run ops/node-deps.sh)")
	}
	bin := "/bin/ls"
	dir := t.TempDir()
	o := images.Options{CoreDNS: bin}
	imgs, err := o.Build(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(imgs, func(i images.Image) bool { return i.Ref == images.CoreDNSRef })
	if i < 0 {
		t.Fatalf("no %s among %v", images.CoreDNSRef, imgs)
	}
	img := imgs[i]
	headers, data := layerFiles(t, img)
	want, _ := os.ReadFile(bin)
	if !bytes.Equal(data["cairn"], want) || headers["cairn"].Mode&0o111 == 0 {
		t.Fatalf("/cairn is not %s, executable", bin)
	}
	for _, f := range []string{"lib64/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libc.so.6", "etc/coredns", "etc/passwd"} {
		if _, ok := headers[f]; !ok {
			t.Errorf("layer lacks %s", f)
		}
	}
	layers, _ := img.V1().Layers()
	if mt, _ := layers[0].MediaType(); mt != types.OCIUncompressedLayer {
		t.Errorf("layer media type %s", mt)
	}
	// The archive's blob is the plain tar its media type says, as
	// containerd unpacks it.
	d, err := layers[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	blob, ok := readArchive(t, img.Archive)["blobs/sha256/"+d.Hex]
	if !ok {
		t.Fatalf("archive lacks the layer blob %s", d)
	}
	if _, err := tar.NewReader(bytes.NewReader(blob)).Next(); err != nil {
		t.Fatalf("layer blob is not a tar: %v", err)
	}
	cf, err := img.V1().ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/cairn", "coredns"}) || !slices.Equal(cf.Config.Cmd, []string{"-conf", "/etc/coredns/Corefile"}) {
		t.Fatalf("entrypoint %v cmd %v", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	again, err := o.Build(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if again[i].Digest != img.Digest {
		t.Fatalf("digest %s then %s", img.Digest, again[i].Digest)
	}
}
