package node

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/ops/images"
)

// Config describes one node's private containerd.
type Config struct {
	// Dir holds everything of this node: config, root, state, sockets (when
	// the path is short enough), CNI config and IPAM state, registry hosts,
	// logs. Required; created if missing.
	Dir string
	// NetNS is the network namespace containerd (and so the CNI bridge and
	// every pod's veth) lives in: a name under /run/netns or an absolute
	// path. Required: pod networks never go in the host namespace.
	NetNS string
	// CreateNetNS creates NetNS with `ip netns add` when it does not exist;
	// Stop deletes it again only if Start created it.
	CreateNetNS bool
	// PodCIDR is the subnet of host-local IPAM; default 10.88.0.0/24. The
	// first address is the bridge (gateway) inside NetNS.
	PodCIDR string
	// Images are imported into the k8s.io namespace at start. Nil builds
	// the ops/images set into Dir/images (from /bin/busybox and the
	// built-in pause program, see images.Options).
	Images []images.Image
	// SandboxImage is the pause image; default images.PauseRef.
	SandboxImage string
	// Containerd is the containerd binary; default "containerd" in PATH.
	Containerd string
	// CNIBinDir holds the CNI plugins; default /usr/lib/cni (Debian).
	CNIBinDir string
	// OCIRuntime is the low-level runtime that containerd's runc shim
	// drives: "crun", "runc", or "" for crun when it is installed and the
	// host's cgroup layout lets it run, else runc (crun 1.8 refuses a hybrid
	// layout whose cgroup2 hierarchy still holds a controller; ops/node-deps.sh
	// moves such a leftover controller to a cgroup v1 hierarchy of its own). crun
	// (C) creates and starts a container for a fraction of runc's CPU (a Go
	// binary, executed twice per container plus its re-executed init),
	// which is what bounds 30 pods starting at once on a small node.
	OCIRuntime string
	// StateOnDisk keeps containerd's state directory and the OCI
	// runtime's root (state/, runc/) on Dir's file system. By default each
	// is a tmpfs mounted there, as containerd's own default state
	// (/run/containerd) is: both hold only what lives as long as the
	// containers (bundles, fifos, pinned network namespaces, runtime
	// state), and every pod creates and later deletes dozens of files
	// there, which on a disk file system costs a journal commit or, on
	// ext4 without a journal, a scan past recently deleted inodes.
	StateOnDisk bool
	// Snapshotter is "overlayfs" or "native"; default overlayfs when an
	// overlay mount works under Dir, else native.
	Snapshotter string
	// KillWithParent asks the kernel to SIGKILL containerd when the thread
	// that started it exits (PR_SET_PDEATHSIG); for tests, so that a
	// crashed test binary leaves no daemon behind. Off for `cairn up`,
	// where containers outlive a kubelet restart.
	KillWithParent bool
	// StartTimeout bounds the wait for the CRI to become ready; default 60s.
	StartTimeout time.Duration
	// LogLevel of containerd; default "info".
	LogLevel string
}

// Namespace is the containerd namespace of the CRI plugin, where images
// are imported.
const Namespace = "k8s.io"

const (
	defaultPodCIDR = "10.88.0.0/24"
	bridgeName     = "cairn0"
	networkName    = "cairn"
	maxSocketPath  = 100 // sun_path is 108 bytes with the NUL
)

// layout is every path derived from a Config.
type layout struct {
	dir, root, state, temp, config, log, pidFile string
	netnsMarker                                  string
	sockDir, sock                                string
	cniConfDir, cniIPAM, hostsDir, runcRoot      string
	imagesDir                                    string
}

func newLayout(dir string) layout {
	l := layout{
		dir:         dir,
		root:        filepath.Join(dir, "root"),
		state:       filepath.Join(dir, "state"),
		temp:        filepath.Join(dir, "tmp"),
		config:      filepath.Join(dir, "containerd.toml"),
		log:         filepath.Join(dir, "containerd.log"),
		pidFile:     filepath.Join(dir, "containerd.pid"),
		netnsMarker: filepath.Join(dir, "netns.created"),
		sockDir:     dir,
		cniConfDir:  filepath.Join(dir, "cni", "net.d"),
		cniIPAM:     filepath.Join(dir, "cni", "ipam"),
		hostsDir:    filepath.Join(dir, "certs.d"),
		runcRoot:    filepath.Join(dir, "runc"),
		imagesDir:   filepath.Join(dir, "images"),
	}
	l.sock = filepath.Join(l.sockDir, "containerd.sock")
	return l
}

func (c *Config) defaults() error {
	if c.Dir == "" {
		return fmt.Errorf("node: Config.Dir is required")
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	c.Dir = dir
	if c.NetNS == "" {
		return fmt.Errorf("node: Config.NetNS is required (pod networks never live in the host namespace)")
	}
	if c.PodCIDR == "" {
		c.PodCIDR = defaultPodCIDR
	}
	ip, ipnet, err := net.ParseCIDR(c.PodCIDR)
	if err != nil || ip.To4() == nil {
		return fmt.Errorf("node: PodCIDR %q: want an IPv4 CIDR: %v", c.PodCIDR, err)
	}
	if ones, _ := ipnet.Mask.Size(); ones > 30 {
		return fmt.Errorf("node: PodCIDR %q is too small", c.PodCIDR)
	}
	c.PodCIDR = ipnet.String()
	if c.SandboxImage == "" {
		c.SandboxImage = images.PauseRef
	}
	if c.Containerd == "" {
		c.Containerd = "containerd"
	}
	if c.CNIBinDir == "" {
		c.CNIBinDir = "/usr/lib/cni"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 60 * time.Second
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	switch c.OCIRuntime {
	case "", "crun", "runc":
	default:
		return fmt.Errorf("node: OCI runtime %q: want crun or runc", c.OCIRuntime)
	}
	switch c.Snapshotter {
	case "", "overlayfs", "native":
	default:
		return fmt.Errorf("node: snapshotter %q: want overlayfs or native", c.Snapshotter)
	}
	return nil
}

// gateway is the first host address of cidr, the bridge's address.
func gateway(cidr string) net.IP {
	_, ipnet, _ := net.ParseCIDR(cidr)
	ip := ipnet.IP.To4()
	gw := make(net.IP, 4)
	copy(gw, ip)
	gw[3]++
	return gw
}

// q quotes a string for TOML (a JSON string is a valid TOML basic string).
func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// containerdConfig renders containerd's config (version 2, containerd 1.6).
func containerdConfig(c Config, l layout, snapshotter, ociRuntime string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Written by cairn services/kubelet/node; rewritten at every start.")
	w("version = 2")
	w("root = %s", q(l.root))
	w("state = %s", q(l.state))
	w("temp = %s", q(l.temp))
	// Plugins a node never uses; fewer plugins start faster and touch no
	// global paths (/opt/containerd).
	w(`disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.internal.v1.tracing",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.internal.v1.restart",
]`)
	w("")
	w("[grpc]")
	w("  address = %s", q(l.sock))
	w("[ttrpc]")
	w("  address = %s", q(l.sock+".ttrpc"))
	w("[debug]")
	w("  level = %s", q(c.LogLevel))
	w("[metrics]")
	w("  address = \"\"")
	w("")
	w(`[plugins."io.containerd.grpc.v1.cri"]`)
	w("  sandbox_image = %s", q(c.SandboxImage))
	w("  stream_server_address = \"127.0.0.1\"")
	w("  stream_server_port = \"0\"")
	w("  disable_tcp_service = true")
	w("  disable_apparmor = true")
	w("  enable_selinux = false")
	w("  systemd_cgroup = false")
	w("  netns_mounts_under_state_dir = true")
	// Without CAP_SYS_RESOURCE (as in many sandboxes) runc may not lower
	// oom_score_adj below containerd's own; clamp instead of failing.
	w("  restrict_oom_score_adj = true")
	w("  max_container_log_line_size = 16384")
	w(`  [plugins."io.containerd.grpc.v1.cri".containerd]`)
	w("    snapshotter = %s", q(snapshotter))
	w("    default_runtime_name = \"runc\"")
	w("    discard_unpacked_layers = false")
	w(`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]`)
	w("      runtime_type = \"io.containerd.runc.v2\"")
	w(`      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`)
	w("        SystemdCgroup = false")
	w("        Root = %s", q(l.runcRoot))
	w("        BinaryName = %s", q(ociRuntime))
	w(`  [plugins."io.containerd.grpc.v1.cri".cni]`)
	w("    bin_dir = %s", q(c.CNIBinDir))
	w("    conf_dir = %s", q(l.cniConfDir))
	w("    max_conf_num = 1")
	w(`  [plugins."io.containerd.grpc.v1.cri".registry]`)
	w("    config_path = %s", q(l.hostsDir))
	w("")
	w(`[plugins."io.containerd.snapshotter.v1.overlayfs"]`)
	w("  root_path = \"\"")
	return b.String()
}

// cniConfig renders the node's one CNI network: a bridge with host-local
// IPAM over the pod CIDR and portmap for hostPorts. containerd's CRI adds
// the loopback network itself (from the loopback plugin in bin_dir).
func cniConfig(c Config, l layout) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       networkName,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridgeName,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": c.PodCIDR, "gateway": gateway(c.PodCIDR).String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": l.cniIPAM,
				},
			},
			map[string]any{
				"type":         "portmap",
				"capabilities": map[string]bool{"portMappings": true},
			},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// hostsTOML is a registry host config that reaches host over plain http.
func hostsTOML(host string) string {
	return fmt.Sprintf("server = %s\n\n[host.%s]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n",
		q("http://"+host), q("http://"+host))
}

// writeFiles writes the containerd config, the CNI conflist and the
// directories containerd expects.
func writeFiles(c Config, l layout, snapshotter, ociRuntime string) error {
	for _, d := range []string{l.dir, l.root, l.state, l.temp, l.cniConfDir, l.cniIPAM, l.hostsDir, l.runcRoot} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}
	if err := os.WriteFile(l.config, []byte(containerdConfig(c, l, snapshotter, ociRuntime)), 0o644); err != nil {
		return fmt.Errorf("node: write containerd config: %w", err)
	}
	cni, err := cniConfig(c, l)
	if err != nil {
		return fmt.Errorf("node: cni config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(l.cniConfDir, "10-cairn.conflist"), cni, 0o644); err != nil {
		return fmt.Errorf("node: write cni config: %w", err)
	}
	return nil
}
