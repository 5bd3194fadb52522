package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-dev/cairn/services/csi/mount"
)

// ErrCrunUnusable is Start's error when Config.OCIRuntime asks for crun and
// the host's cgroup layout does not let crun create containers.
var ErrCrunUnusable = errors.New("node: crun cannot run on this host's cgroup layout")

// chooseOCIRuntime resolves Config.OCIRuntime to the binary the runc shim
// executes, and says why when the default fell back to runc.
func chooseOCIRuntime(want string) (path, fallback string, err error) {
	look := func(name string) (string, error) {
		for _, dir := range filepath.SplitList(withSbin(os.Getenv("PATH"))) {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return p, nil
			}
		}
		return "", fmt.Errorf("node: %s: %w", name, exec.ErrNotFound)
	}
	if want == "runc" {
		p, err := look(want)
		return p, "", err
	}
	// crun, asked for or the default: one look-up and one cgroup check.
	p, err := look("crun")
	why := "crun is not installed"
	if err == nil {
		why = crunCgroupProblem("/sys/fs/cgroup")
	}
	switch {
	case want == "crun" && err != nil:
		return "", "", err
	case want == "crun" && why != "":
		return "", "", fmt.Errorf("%w: %s", ErrCrunUnusable, why)
	case why == "":
		return p, "", nil
	}
	p, err = look("runc")
	return p, why, err
}

// crunCgroupProblem says why crun cannot create containers on the cgroup
// hierarchy mounted at root, or "" when it can. crun (1.8) runs on cgroup v2
// and on cgroup v1, but on a hybrid layout (v1 controllers plus a cgroup2
// hierarchy at root/unified) only when that cgroup2 hierarchy holds no
// controller: "cgroups in hybrid mode not supported, drop all controllers
// from cgroupv2".
func crunCgroupProblem(root string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return fmt.Sprintf("cannot inspect %s: %v", root, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return ""
	}
	unified := filepath.Join(root, "unified")
	if err := unix.Statfs(unified, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return "" // cgroup v1 only
	}
	b, err := os.ReadFile(filepath.Join(unified, "cgroup.controllers"))
	if err != nil {
		return fmt.Sprintf("cannot read %s/cgroup.controllers: %v", unified, err)
	}
	if c := strings.TrimSpace(string(b)); c != "" {
		return fmt.Sprintf("hybrid cgroup layout with controllers %q left in %s (ops/node-deps.sh mounts them as cgroup v1 hierarchies)", c, unified)
	}
	return ""
}

var binaryNameRE = regexp.MustCompile(`(?m)^\s*BinaryName\s*=\s*(".*")\s*$`)

// configuredOCIRuntime reads the OCI runtime from a containerd config that
// containerdConfig wrote, for an adopted containerd; "runc" when the config
// names none (one written before the choice existed).
func configuredOCIRuntime(config string) string {
	b, err := os.ReadFile(config)
	if err != nil {
		return "runc"
	}
	m := binaryNameRE.FindSubmatch(b)
	if m == nil {
		return "runc"
	}
	s, err := strconv.Unquote(string(m[1]))
	if err != nil {
		return "runc"
	}
	return s
}

// mountStateTmpfs mounts a tmpfs on each of dirs that is not a mount
// point already (a containerd adopted after its owner's crash keeps the
// one mounted before).
func mountStateTmpfs(dirs ...string) error {
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("node: %w", err)
		}
		mounted, err := mount.IsMountPoint(d)
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
		if mounted {
			continue
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0711"); err != nil {
			return fmt.Errorf("node: mount tmpfs on %s: %w", d, err)
		}
	}
	return nil
}
