// Package images builds, offline and without docker or a registry, the
// small OCI images a cairn node runs:
//
//   - [BusyboxRef] (cairn.local/busybox:1.36): Debian's static /bin/busybox
//     with a symlink for every applet it lists (sh, sleep, httpd, cat, echo,
//     ls, wget, hostname, nc, ...), /etc/passwd and /etc/group (root,
//     nobody), /tmp (1777), /root and /var/www holding an index.html. The tag
//     is cairn's own, fixed so that pods can name it; it is not busybox's
//     version (Debian bookworm ships 1.35).
//   - [PauseRef] (cairn.local/pause:3.10): the sandbox image, a static
//     ELF program of a few hundred bytes that this package writes itself
//     ([PauseProgram], for amd64 and arm64): it waits until SIGTERM or
//     SIGINT and reaps zombies, as Kubernetes' pause does.
//
// Nothing is compiled and nothing is read from cairn's source tree, so a
// copied cairn binary builds both images on any machine that has Debian's
// busybox-static (ops/node-deps.sh installs it).
//
// # Archives
//
// [Build] writes one OCI image-layout tarball per image (oci-layout,
// index.json, blobs/sha256/...) into a directory. The index entry carries
// the annotation io.containerd.image.name with the full reference, so both
// `ctr -n k8s.io images import FILE` and containerd's client Import name the
// image without options. Layers are gzip tarballs.
//
// # Determinism
//
// Every timestamp is [Epoch], owners are 0:0, entries are sorted, gzip
// headers are empty and the pause program is the same bytes everywhere.
// Building twice with the same busybox gives the same digests, and Build
// leaves an archive file untouched when its bytes would not change, so a
// rebuild and a re-import are no-ops.
//
// # Registries
//
// [Image.V1] exposes each image as a go-containerregistry v1.Image, and
// [Push] writes it to a registry (plain http allowed), e.g. one served on
// loopback by github.com/google/go-containerregistry/pkg/registry for a CRI
// PullImage test.
package images
