package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/services/csi/mount"
	"github.com/cairn-dev/cairn/services/kubelet/container"
)

// podDir is the pod's directory: RootDir/pods/<uid>.
func (k *Kubelet) podDir(uid string) string {
	return filepath.Join(k.cfg.RootDir, "pods", uid)
}

// volumeDir is where a volume of the pod lives on the host (except
// hostPath, which is the host path itself).
func (k *Kubelet) volumeDir(uid string, v *corev1.Volume) string {
	if v.HostPath != nil {
		return v.HostPath.Path
	}
	kind := "other"
	switch {
	case v.EmptyDir != nil:
		kind = "kubernetes.io~empty-dir"
	case v.ConfigMap != nil:
		kind = "kubernetes.io~configmap"
	case v.Secret != nil:
		kind = "kubernetes.io~secret"
	case v.DownwardAPI != nil:
		kind = "kubernetes.io~downward-api"
	case v.Projected != nil:
		kind = "kubernetes.io~projected"
	}
	return filepath.Join(k.podDir(uid), "volumes", kind, v.Name)
}

// setupVolumes prepares every volume before the sandbox starts:
// emptyDir directories, hostPath checks (creating DirectoryOrCreate and
// FileOrCreate), and the files of configMap, secret, downwardAPI and
// projected volumes, read through the apiserver and written to the pod's
// directory. Secret, downwardAPI and projected volumes and emptyDir with
// medium Memory each get a tmpfs of their own first (inMemory), which
// teardownVolumes unmounts. A volume that fails is recorded as a
// FailedMount event.
func (k *Kubelet) setupVolumes(ctx context.Context, pod *corev1.Pod) error {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		dir := k.volumeDir(string(pod.UID), v)
		var err error
		switch {
		case claimName(pod, v) != "":
			continue // CSI: setupCSIVolumes
		case v.HostPath != nil:
			err = setupHostPath(v.HostPath)
		case v.EmptyDir != nil:
			err = makeVolumeDir(dir, v)
			if err == nil && !inMemory(v) {
				err = os.Chmod(dir, 0o777) // past the umask
			}
		default:
			var files map[string]volumeFile
			files, err = k.volumeFiles(ctx, pod, v)
			if err == nil {
				err = makeVolumeDir(dir, v)
			}
			if err == nil {
				err = writeVolume(dir, files)
			}
		}
		if err != nil {
			k.podEventf(ctx, pod, corev1.EventTypeWarning, ReasonFailedMount, "MountVolume.SetUp failed for volume %q : %v", v.Name, err)
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

// memoryKinds are the volume directories (RootDir/pods/<uid>/volumes/<kind>)
// that may hold a tmpfs of the kubelet's (inMemory).
var memoryKinds = []string{"kubernetes.io~empty-dir", "kubernetes.io~secret", "kubernetes.io~downward-api", "kubernetes.io~projected"}

// inMemory reports whether a volume lives on a tmpfs of its own, as kube's
// secret, downwardAPI and projected plugins wrap an emptyDir of medium
// Memory: what is written there (service-account tokens, secrets) never
// reaches the node's disk, and writing it costs no disk I/O.
func inMemory(v *corev1.Volume) bool {
	switch {
	case v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
		return true
	case v.EmptyDir != nil:
		return v.EmptyDir.Medium == corev1.StorageMediumMemory
	}
	return false
}

// makeVolumeDir makes a volume's directory and, for a volume inMemory,
// mounts its tmpfs there unless an earlier sandbox of the pod (or a
// kubelet before a restart) already did. The tmpfs root keeps the kernel's
// mode 1777, as kube's does; an emptyDir's sizeLimit is its size.
func makeVolumeDir(dir string, v *corev1.Volume) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if !inMemory(v) {
		return nil
	}
	if mounted, err := mount.IsFilesystemRoot(dir); err != nil || mounted {
		return err
	}
	var opts string
	if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.Sign() > 0 {
		opts = "size=" + strconv.FormatInt(v.EmptyDir.SizeLimit.Value(), 10)
	}
	return mount.Tmpfs(dir, opts)
}

// unmountMemoryVolumes unmounts the tmpfs of every volume of the pod that
// has one (unmountPodMemory).
func (k *Kubelet) unmountMemoryVolumes(uid types.UID) error {
	if k.info.Simulated || k.cfg.RootDir == "" {
		return nil
	}
	return unmountPodMemory(k.podDir(string(uid)))
}

// UnmountMemoryVolumes unmounts the tmpfs of every in-memory volume of
// every pod under a kubelet's RootDir (Config.RootDir). It is for the owner
// of a node whose pods are all gone from the runtime, such as RunNode after
// it stopped the node, or a clean-up of what a killed one left; the pod
// directories stay for the next kubelet to remove.
func UnmountMemoryVolumes(rootDir string) error {
	entries, err := os.ReadDir(filepath.Join(rootDir, "pods"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, unmountPodMemory(filepath.Join(rootDir, "pods", e.Name())))
	}
	return errors.Join(errs...)
}

// unmountPodMemory unmounts the tmpfs of every in-memory volume under a
// pod's directory. It goes by the directory, not the pod's spec, so it
// also serves a kubelet that restarted after the pod was deleted; it is
// idempotent.
func unmountPodMemory(podDir string) error {
	var errs []error
	for _, kind := range memoryKinds {
		base := filepath.Join(podDir, "volumes", kind)
		entries, err := os.ReadDir(base)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		for _, e := range entries {
			dir := filepath.Join(base, e.Name())
			if mounted, err := mount.IsFilesystemRoot(dir); err != nil || !mounted {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, mount.Unmount(dir))
		}
	}
	return errors.Join(errs...)
}

func setupHostPath(h *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if h.Type != nil {
		t = *h.Type
	}
	fi, err := os.Stat(h.Path)
	switch t {
	case corev1.HostPathDirectoryOrCreate:
		if os.IsNotExist(err) {
			return os.MkdirAll(h.Path, 0o755)
		}
	case corev1.HostPathFileOrCreate:
		if os.IsNotExist(err) {
			if err := os.MkdirAll(filepath.Dir(h.Path), 0o755); err != nil {
				return err
			}
			return os.WriteFile(h.Path, nil, 0o644)
		}
	case corev1.HostPathDirectory:
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", h.Path)
		}
	case corev1.HostPathFile:
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", h.Path)
		}
	}
	return nil
}

type volumeFile struct {
	data []byte
	mode os.FileMode
}

// volumeFiles are the files of a configMap, secret, downwardAPI or
// projected volume.
func (k *Kubelet) volumeFiles(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) (map[string]volumeFile, error) {
	files := map[string]volumeFile{}
	switch {
	case v.ConfigMap != nil:
		return files, k.configMapFiles(ctx, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.DefaultMode, v.ConfigMap.Optional, files)
	case v.Secret != nil:
		return files, k.secretFiles(ctx, pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.DefaultMode, v.Secret.Optional, files)
	case v.DownwardAPI != nil:
		return files, k.downwardFiles(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, files)
	case v.Projected != nil:
		for _, src := range v.Projected.Sources {
			var err error
			switch {
			case src.ConfigMap != nil:
				err = k.configMapFiles(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, v.Projected.DefaultMode, src.ConfigMap.Optional, files)
			case src.Secret != nil:
				err = k.secretFiles(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, v.Projected.DefaultMode, src.Secret.Optional, files)
			case src.DownwardAPI != nil:
				err = k.downwardFiles(pod, src.DownwardAPI.Items, v.Projected.DefaultMode, files)
			case src.ServiceAccountToken != nil:
				err = k.tokenFile(ctx, pod, src.ServiceAccountToken, v.Projected.DefaultMode, files)
			}
			if err != nil {
				return nil, err
			}
		}
		return files, nil
	}
	return nil, fmt.Errorf("unsupported volume type")
}

// tokenFile is a serviceAccountToken projection: the pod's token from
// the token manager.
func (k *Kubelet) tokenFile(ctx context.Context, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection, def *int32, files map[string]volumeFile) error {
	tr, err := k.tokens.token(ctx, pod.Namespace, pod.Spec.ServiceAccountName, podTokenRequest(pod, p))
	if err != nil {
		return err
	}
	files[p.Path] = volumeFile{data: []byte(tr.Status.Token), mode: fileMode(nil, def)}
	return nil
}

// refreshTokens rewrites the projected volumes of a running pod whose
// tokens are due for a refresh (the kubelet's volume manager remounts
// them for the same reason). A failed refresh is a FailedMount event; the
// old token stays until the next sync.
func (k *Kubelet) refreshTokens(ctx context.Context, pod *corev1.Pod) {
	if k.info.Simulated || !k.tokens.needsRefresh(pod) {
		return
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Projected == nil {
			continue
		}
		files, err := k.volumeFiles(ctx, pod, v)
		if err == nil {
			err = writeVolume(k.volumeDir(string(pod.UID), v), files)
		}
		if err != nil {
			k.podEventf(ctx, pod, corev1.EventTypeWarning, ReasonFailedMount, "MountVolume.SetUp failed for volume %q : %v", v.Name, err)
		}
	}
}

func fileMode(item, def *int32) os.FileMode {
	switch {
	case item != nil:
		return os.FileMode(*item)
	case def != nil:
		return os.FileMode(*def)
	}
	return 0o644
}

// keyFiles maps data to files: every key, or only the listed items.
func keyFiles(data map[string][]byte, items []corev1.KeyToPath, def *int32, what string, files map[string]volumeFile) error {
	if len(items) == 0 {
		for key, v := range data {
			files[key] = volumeFile{data: v, mode: fileMode(nil, def)}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("configuration error: key %q not found in %s", it.Key, what)
		}
		files[it.Path] = volumeFile{data: v, mode: fileMode(it.Mode, def)}
	}
	return nil
}

func (k *Kubelet) configMapFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, def *int32, opt *bool, files map[string]volumeFile) error {
	cm, err := k.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if optional(opt) {
			return nil
		}
		return fmt.Errorf("configmap %q: %w", name, err)
	}
	data := map[string][]byte{}
	for key, v := range cm.Data {
		data[key] = []byte(v)
	}
	for key, v := range cm.BinaryData {
		data[key] = v
	}
	return keyFiles(data, items, def, "ConfigMap "+ns+"/"+name, files)
}

func (k *Kubelet) secretFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, def *int32, opt *bool, files map[string]volumeFile) error {
	s, err := k.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if optional(opt) {
			return nil
		}
		return fmt.Errorf("secret %q: %w", name, err)
	}
	return keyFiles(s.Data, items, def, "Secret "+ns+"/"+name, files)
}

func (k *Kubelet) downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, def *int32, files map[string]volumeFile) error {
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = k.fieldValue(pod, it.FieldRef.FieldPath, nil)
		case it.ResourceFieldRef != nil:
			c := containerNamed(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return fmt.Errorf("downwardAPI: no container %q", it.ResourceFieldRef.ContainerName)
			}
			v, err = resourceValue(c, it.ResourceFieldRef)
		}
		if err != nil {
			return err
		}
		files[it.Path] = volumeFile{data: []byte(v), mode: fileMode(it.Mode, def)}
	}
	return nil
}

func containerNamed(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// writeVolume (re)writes a volume's files; files that no longer belong are
// removed. Paths may not leave the volume.
func writeVolume(dir string, files map[string]volumeFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	keep := map[string]bool{}
	for p, f := range files {
		clean := filepath.Clean(p)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("invalid volume path %q", p)
		}
		full := filepath.Join(dir, clean)
		keep[full] = true
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		tmp := full + ".tmp"
		if err := os.WriteFile(tmp, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(tmp, f.mode); err != nil {
			return err
		}
		if err := os.Rename(tmp, full); err != nil {
			return err
		}
	}
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && !keep[p] {
			return os.Remove(p)
		}
		return nil
	})
}

// mounts are a container's volumeMounts as bind mounts, with subPath.
func (k *Kubelet) mounts(pod *corev1.Pod, c *corev1.Container) ([]container.Mount, error) {
	byName := map[string]*corev1.Volume{}
	for i := range pod.Spec.Volumes {
		byName[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var out []container.Mount
	for _, m := range c.VolumeMounts {
		v, ok := byName[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: no volume with that name", m.Name)
		}
		host := k.volumeDir(string(pod.UID), v)
		if claimName(pod, v) != "" {
			var ok bool
			if host, ok = k.csiTarget(pod.UID, v.Name); !ok {
				return nil, fmt.Errorf("volumeMount %q: volume %q is not mounted", m.Name, v.Name)
			}
		}
		if m.SubPath != "" {
			sub := filepath.Clean(m.SubPath)
			if filepath.IsAbs(sub) || strings.HasPrefix(sub, "..") {
				return nil, fmt.Errorf("volumeMount %q: invalid subPath %q", m.Name, m.SubPath)
			}
			host = filepath.Join(host, sub)
			if _, err := os.Stat(host); os.IsNotExist(err) {
				if err := os.MkdirAll(host, 0o755); err != nil {
					return nil, fmt.Errorf("volumeMount %q: subPath: %w", m.Name, err)
				}
			}
		}
		out = append(out, container.Mount{HostPath: host, ContainerPath: m.MountPath, ReadOnly: m.ReadOnly})
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].ContainerPath) < len(out[j].ContainerPath) })
	return out, nil
}

// removePodDirs removes the pod's volumes (not hostPaths) and logs.
func (k *Kubelet) removePodDirs(uid, namespace, name string) {
	if (k.info.Simulated && k.csi == nil) || k.cfg.RootDir == "" || uid == "" {
		return
	}
	k.tokens.forgetPod(types.UID(uid))
	// Never remove through a mount: that would delete a volume's data.
	if mounts, err := mount.Under(k.podDir(uid)); err != nil || len(mounts) > 0 {
		k.log.Warn("pod dir still has mounts: kept", "uid", uid, "mounts", mounts, "err", err)
		return
	}
	if err := os.RemoveAll(k.podDir(uid)); err != nil {
		k.log.Warn("remove pod dir", "uid", uid, "err", err)
	}
	if namespace != "" && name != "" {
		if err := os.RemoveAll(k.logDir(namespace, name, uid)); err != nil {
			k.log.Warn("remove pod logs", "uid", uid, "err", err)
		}
	}
}

func sortStrings(s []string) { sort.Strings(s) }
