// Package mount holds the few mount-table operations CSI and the kubelet
// need on Linux: bind mounts (read-only when asked), tmpfs mounts,
// unmounts, and questions to the kernel's mount table
// (/proc/self/mountinfo) such as "is this path a mount point" and "which
// mounts lie under this directory".
//
// The hostpath CSI driver uses it to stage and publish volumes, the kubelet
// to put its pods' secret and projected volumes on tmpfs and to find the
// mounts of its pods after a restart. Every function is safe for
// concurrent use; none keeps state.
package mount
