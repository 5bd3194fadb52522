package container

import (
	"context"
	"errors"
	"time"
)

// Labels set on every sandbox and container, as the real kubelet names them
// (so crictl and ctr show them the familiar way).
const (
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelContainerName = "io.kubernetes.container.name"
	// LabelManagedBy marks what a cairn kubelet created, so housekeeping
	// never touches anything else in the runtime.
	LabelManagedBy = "cairn.dev/kubelet"
)

// Sentinel errors of runtimes. Check them with errors.Is.
var (
	ErrNotFound       = errors.New("container: not found")
	ErrImagePull      = errors.New("container: image pull failed")
	ErrImageNeverPull = errors.New("container: image not present with pull policy Never")
)

// Runtime is what a kubelet needs from a container runtime. Every method is
// safe for concurrent use. Ids are the runtime's own.
type Runtime interface {
	// Info names the runtime ("containerd", "hollow") and its version.
	Info(ctx context.Context) (Info, error)

	// RunSandbox creates and starts a pod sandbox: its network namespace
	// and IP, its log directory. It returns the sandbox id.
	RunSandbox(ctx context.Context, cfg *SandboxConfig) (string, error)
	// StopSandbox stops every container of the sandbox and tears its
	// network down; the sandbox record stays until RemoveSandbox.
	StopSandbox(ctx context.Context, id string) error
	// RemoveSandbox removes a stopped sandbox and all its containers.
	RemoveSandbox(ctx context.Context, id string) error

	// ImageRef returns the reference (digest id) of a locally present
	// image, or "" when it is not present.
	ImageRef(ctx context.Context, image string) (string, error)
	// PullImage pulls an image and returns it (its reference, and its
	// size when the runtime knows it); failures wrap ErrImagePull.
	PullImage(ctx context.Context, image string) (Image, error)

	// CreateContainer creates a container in a ready sandbox.
	CreateContainer(ctx context.Context, sandboxID string, sb *SandboxConfig, cfg *ContainerConfig) (string, error)
	// StartContainer starts a created container.
	StartContainer(ctx context.Context, id string) error
	// StopContainer sends the stop signal (SIGTERM) and, after grace, kills
	// the container (SIGKILL). It returns once the container has exited.
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	// RemoveContainer removes an exited container.
	RemoveContainer(ctx context.Context, id string) error

	// ListPods returns every sandbox and container the kubelet created,
	// grouped by pod UID, with full status.
	ListPods(ctx context.Context) (map[string]*PodStatus, error)
	// PodStatus returns the sandboxes and containers of one pod.
	PodStatus(ctx context.Context, podUID string) (*PodStatus, error)

	// ExecSync runs a command in a running container and waits for it.
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*ExecResult, error)
	// Exec prepares a streaming exec and returns the URL of the runtime's
	// streaming server that serves it (SPDY or websocket).
	Exec(ctx context.Context, req *ExecRequest) (string, error)
	// Attach prepares a streaming attach to a running container's main
	// process and returns the URL of the runtime's streaming server that
	// serves it (SPDY or websocket).
	Attach(ctx context.Context, req *AttachRequest) (string, error)
	// PortForward prepares a port forward into a sandbox's network
	// namespace and returns the URL of the runtime's streaming server that
	// serves it (SPDY or websocket). ports may be empty: SPDY clients name
	// the port of each stream.
	PortForward(ctx context.Context, sandboxID string, ports []int32) (string, error)

	// UpdatePodCIDR hands the node's pod CIDR to the runtime (its CNI
	// configuration), as kubelet's UpdateRuntimeConfig does.
	UpdatePodCIDR(ctx context.Context, cidr string) error
}

// Info describes a runtime.
type Info struct {
	// Name is the runtime's name, the scheme of container ids in pod
	// status ("containerd" gives containerd://<id>).
	Name    string
	Version string
	// Simulated is true for runtimes that run nothing (hollow nodes): the
	// kubelet then labels its node so, and probes always succeed.
	Simulated bool
}

// Image is a pulled image.
type Image struct {
	// Ref is the image's reference (digest id), as ImageRef returns it.
	Ref string
	// Size is its size in bytes, 0 when unknown.
	Size uint64
}

// SandboxState is the state of a sandbox.
type SandboxState int

// Sandbox states, as CRI's PodSandboxState.
const (
	SandboxReady SandboxState = iota
	SandboxNotReady
)

// State is the state of a container.
type State int

// Container states, as CRI's ContainerState.
const (
	StateCreated State = iota
	StateRunning
	StateExited
	StateUnknown
)

func (s State) String() string {
	switch s {
	case StateCreated:
		return "created"
	case StateRunning:
		return "running"
	case StateExited:
		return "exited"
	}
	return "unknown"
}

// PortMapping maps a host port to a pod port.
type PortMapping struct {
	Protocol      string // TCP, UDP or SCTP
	ContainerPort int32
	HostPort      int32
	HostIP        string
}

// SandboxConfig describes a pod sandbox.
type SandboxConfig struct {
	PodUID, Name, Namespace string
	Attempt                 uint32
	Hostname                string
	// LogDirectory holds the containers' log files
	// (<root>/pods/<ns>_<name>_<uid>).
	LogDirectory string
	PortMappings []PortMapping
	Labels       map[string]string
	Annotations  map[string]string
	// CgroupParent is the pod's cgroup; empty lets the runtime choose.
	CgroupParent string
	// DNS is the sandbox's resolver configuration, which the runtime
	// writes into its /etc/resolv.conf; nil leaves the runtime's default.
	DNS *DNSConfig
}

// DNSConfig is a sandbox's resolver configuration (CRI's DNSConfig).
type DNSConfig struct {
	Servers, Searches, Options []string
}

// Sandbox is a pod sandbox as the runtime reports it.
type Sandbox struct {
	ID                      string
	PodUID, Name, Namespace string
	Attempt                 uint32
	State                   SandboxState
	// IPs are the pod's addresses, the primary first.
	IPs       []string
	CreatedAt time.Time
}

// Mount is a bind mount into a container.
type Mount struct {
	HostPath      string
	ContainerPath string
	ReadOnly      bool
}

// Resources are the Linux limits of a container.
type Resources struct {
	CPUShares   int64
	CPUQuota    int64 // microseconds per CPUPeriod; 0 is unlimited
	CPUPeriod   int64
	MemoryLimit int64 // bytes; 0 is unlimited
}

// ContainerConfig describes a container to create.
type ContainerConfig struct {
	Name    string
	Attempt uint32
	// Image is the image reference returned by ImageRef or PullImage;
	// ImageName the spec's image.
	Image, ImageName string
	Command, Args    []string
	Env              []EnvVar
	WorkingDir       string
	Mounts           []Mount
	// LogPath is relative to the sandbox's LogDirectory.
	LogPath     string
	Resources   Resources
	Stdin, TTY  bool
	Labels      map[string]string
	Annotations map[string]string
}

// Notifier is a Runtime that reports a container changing state on its
// own (exiting), as CRI's container events do for kube's evented PLEG: the
// kubelet then syncs that pod at once rather than at its next relist, which
// it still runs.
type Notifier interface {
	// SetNotify sets the function called with the pod's UID after one of
	// its containers changed state; it must not block.
	SetNotify(func(podUID string))
}

// EnvVar is one environment variable.
type EnvVar struct{ Name, Value string }

// Container is a container as the runtime reports it.
type Container struct {
	ID, SandboxID string
	PodUID        string
	Name          string
	Attempt       uint32
	State         State
	// Image is the image the container was created from (the spec's
	// name), ImageRef its digest id.
	Image, ImageRef                  string
	CreatedAt, StartedAt, FinishedAt time.Time
	ExitCode                         int32
	// Reason is the runtime's reason for an exit ("OOMKilled",
	// "Completed", "Error").
	Reason, Message string
	// LogPath is the absolute path of the container's log file.
	LogPath     string
	Labels      map[string]string
	Annotations map[string]string
}

// PodStatus is what the runtime holds for one pod: its sandboxes (newest
// first) and its containers (newest first).
type PodStatus struct {
	UID             string
	Name, Namespace string
	Sandboxes       []*Sandbox
	Containers      []*Container
}

// ExecResult is the outcome of ExecSync.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int32
}

// ExecRequest asks for a streaming exec.
type ExecRequest struct {
	ContainerID                string
	Cmd                        []string
	TTY, Stdin, Stdout, Stderr bool
}

// AttachRequest asks for a streaming attach to a container's main process.
type AttachRequest struct {
	ContainerID                string
	TTY, Stdin, Stdout, Stderr bool
}
