package mount

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Bind mounts src at dst (both must exist). A read-only bind mount needs a
// second remount: the kernel ignores MS_RDONLY on the first MS_BIND.
func Bind(src, dst string, readOnly bool) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mount: bind %s at %s: %w", src, dst, err)
	}
	if !readOnly {
		return nil
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		_ = unix.Unmount(dst, unix.MNT_DETACH)
		return fmt.Errorf("mount: remount %s read-only: %w", dst, err)
	}
	return nil
}

// Tmpfs mounts a new tmpfs at dir (which must exist), where set-user-ID
// bits and device files have no effect. options are tmpfs's own, such as
// "size=64m"; empty gives the kernel's defaults (mode 1777, half of RAM).
func Tmpfs(dir, options string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, options); err != nil {
		return fmt.Errorf("mount: tmpfs at %s: %w", dir, err)
	}
	return nil
}

// IsFilesystemRoot reports whether path is the root of a filesystem other
// than its parent directory's, as a tmpfs mounted there is. It asks stat,
// not the mount table, so it costs two system calls whatever the number of
// mounts; a bind mount of a directory of the parent's filesystem is not
// seen (use IsMountPoint). A path that does not exist is not a root.
func IsFilesystemRoot(path string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("mount: stat %s: %w", path, err)
	}
	if err := unix.Lstat(filepath.Dir(path), &parent); err != nil {
		return false, fmt.Errorf("mount: stat %s: %w", filepath.Dir(path), err)
	}
	return st.Dev != parent.Dev, nil
}

// Unmount detaches every mount stacked at path; a path that is not a mount
// point (or does not exist) is not an error, so it is idempotent.
func Unmount(path string) error {
	for {
		mounted, err := IsMountPoint(path)
		if err != nil || !mounted {
			return err
		}
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("mount: unmount %s: %w", path, err)
		}
	}
}

// Info is one line of /proc/self/mountinfo, the fields CSI looks at.
type Info struct {
	// Root is the path inside the source filesystem that is mounted (for a
	// bind mount, the bound directory relative to its filesystem's root).
	Root string
	// MountPoint is where it is mounted.
	MountPoint string
	// ReadOnly reports the per-mount "ro" option.
	ReadOnly bool
}

// List returns the mount table of this process's mount namespace.
func List() ([]Info, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("mount: %w", err)
	}
	defer f.Close()
	var out []Info
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		ro := false
		for _, o := range strings.Split(fields[5], ",") {
			ro = ro || o == "ro"
		}
		out = append(out, Info{Root: Unescape(fields[3]), MountPoint: Unescape(fields[4]), ReadOnly: ro})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mount: read mountinfo: %w", err)
	}
	return out, nil
}

// IsMountPoint reports whether path is a mount point. Bind mounts of a
// directory of the same filesystem keep its device number, so the mount
// table is asked rather than stat.
func IsMountPoint(path string) (bool, error) {
	info, err := Find(path)
	return info != nil, err
}

// Find returns the topmost mount at path, or nil when path is not a mount
// point.
func Find(path string) (*Info, error) {
	mounts, err := List()
	if err != nil {
		return nil, err
	}
	var found *Info
	for i := range mounts {
		if mounts[i].MountPoint == path {
			found = &mounts[i]
		}
	}
	return found, nil
}

// Under returns the mount points at or below dir, deepest first, so that
// unmounting them in order never leaves a busy parent.
func Under(dir string) ([]string, error) {
	mounts, err := List()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") {
			out = append(out, m.MountPoint)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// Unescape undoes mountinfo's octal escapes (\040 for space, ...).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
