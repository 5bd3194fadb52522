package cri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/kubelet/container"
)

// Config configures a CRI runtime.
type Config struct {
	// Runtime and Image are the CRI clients (both served on one
	// connection by containerd; see Dial).
	Runtime runtimeapi.RuntimeServiceClient
	Image   runtimeapi.ImageServiceClient
	// CgroupParent, if set, is the cgroupfs parent of every pod's cgroup
	// (<CgroupParent>/pod<uid>).
	CgroupParent string
	Log          *slog.Logger
}

// Runtime is container.Runtime over CRI.
type Runtime struct {
	cfg Config
	rt  runtimeapi.RuntimeServiceClient
	img runtimeapi.ImageServiceClient
	log *slog.Logger
}

var _ container.Runtime = (*Runtime)(nil)

// New returns a runtime over the given CRI clients.
func New(cfg Config) (*Runtime, error) {
	if cfg.Runtime == nil || cfg.Image == nil {
		return nil, errors.New("cri: new: Runtime and Image clients are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{cfg: cfg, rt: cfg.Runtime, img: cfg.Image, log: cfg.Log}, nil
}

// Dial connects to a CRI endpoint ("unix:///path/containerd.sock"); the
// caller closes the connection.
func Dial(endpoint string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, fmt.Errorf("cri: dial %s: %w", endpoint, err)
	}
	return conn, nil
}

// wrap turns gRPC NotFound into container.ErrNotFound.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if status.Code(err) == codes.NotFound {
		return fmt.Errorf("cri: %s: %w: %w", op, container.ErrNotFound, err)
	}
	return fmt.Errorf("cri: %s: %w", op, err)
}

// Info implements container.Runtime.
func (r *Runtime) Info(ctx context.Context) (container.Info, error) {
	v, err := r.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return container.Info{}, wrap("version", err)
	}
	return container.Info{Name: v.RuntimeName, Version: v.RuntimeVersion}, nil
}

func podLabels(uid, name, namespace string) map[string]string {
	return map[string]string{
		container.LabelPodUID: uid, container.LabelPodName: name, container.LabelPodNamespace: namespace,
		container.LabelManagedBy: "true",
	}
}

func (r *Runtime) sandboxConfig(cfg *container.SandboxConfig) *runtimeapi.PodSandboxConfig {
	labels := maps.Clone(cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, podLabels(cfg.PodUID, cfg.Name, cfg.Namespace))
	sc := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: cfg.Name, Uid: cfg.PodUID, Namespace: cfg.Namespace, Attempt: cfg.Attempt},
		Hostname:     cfg.Hostname,
		LogDirectory: cfg.LogDirectory,
		Labels:       labels,
		Annotations:  maps.Clone(cfg.Annotations),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{
					Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD,
				},
			},
		},
	}
	if d := cfg.DNS; d != nil {
		sc.DnsConfig = &runtimeapi.DNSConfig{Servers: d.Servers, Searches: d.Searches, Options: d.Options}
	}
	if r.cfg.CgroupParent != "" {
		sc.Linux.CgroupParent = r.cfg.CgroupParent + "/pod" + cfg.PodUID
	}
	for _, p := range cfg.PortMappings {
		proto := runtimeapi.Protocol_TCP
		switch p.Protocol {
		case "UDP":
			proto = runtimeapi.Protocol_UDP
		case "SCTP":
			proto = runtimeapi.Protocol_SCTP
		}
		sc.PortMappings = append(sc.PortMappings, &runtimeapi.PortMapping{
			Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP})
	}
	return sc
}

// RunSandbox implements container.Runtime.
func (r *Runtime) RunSandbox(ctx context.Context, cfg *container.SandboxConfig) (string, error) {
	if cfg.LogDirectory != "" {
		if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
			return "", fmt.Errorf("cri: log directory: %w", err)
		}
	}
	resp, err := r.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: r.sandboxConfig(cfg)})
	if err != nil {
		return "", wrap("run pod sandbox", err)
	}
	return resp.PodSandboxId, nil
}

// StopSandbox implements container.Runtime.
func (r *Runtime) StopSandbox(ctx context.Context, id string) error {
	_, err := r.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	return wrap("stop pod sandbox", err)
}

// RemoveSandbox implements container.Runtime.
func (r *Runtime) RemoveSandbox(ctx context.Context, id string) error {
	_, err := r.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	return wrap("remove pod sandbox", err)
}

// ImageRef implements container.Runtime.
func (r *Runtime) ImageRef(ctx context.Context, image string) (string, error) {
	resp, err := r.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return "", wrap("image status", err)
	}
	if resp.Image == nil {
		return "", nil
	}
	return resp.Image.Id, nil
}

// PullImage implements container.Runtime. The size comes from an
// ImageStatus after the pull (PullImage does not return it), as the
// kubelet's image puller asks for it; without it the size is 0.
func (r *Runtime) PullImage(ctx context.Context, image string) (container.Image, error) {
	resp, err := r.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return container.Image{}, fmt.Errorf("cri: pull %s: %w: %w", image, container.ErrImagePull, err)
	}
	img := container.Image{Ref: resp.ImageRef}
	if st, err := r.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: resp.ImageRef}}); err == nil && st.Image != nil {
		img.Size = st.Image.Size
	}
	return img, nil
}

// CreateContainer implements container.Runtime.
func (r *Runtime) CreateContainer(ctx context.Context, sandboxID string, sb *container.SandboxConfig, cfg *container.ContainerConfig) (string, error) {
	labels := maps.Clone(cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, podLabels(sb.PodUID, sb.Name, sb.Namespace))
	labels[container.LabelContainerName] = cfg.Name
	cc := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: cfg.Name, Attempt: cfg.Attempt},
		Image:       &runtimeapi.ImageSpec{Image: cfg.Image, UserSpecifiedImage: cfg.ImageName},
		Command:     cfg.Command,
		Args:        cfg.Args,
		WorkingDir:  cfg.WorkingDir,
		Labels:      labels,
		Annotations: maps.Clone(cfg.Annotations),
		LogPath:     cfg.LogPath,
		Stdin:       cfg.Stdin,
		Tty:         cfg.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources: &runtimeapi.LinuxContainerResources{
				CpuShares: cfg.Resources.CPUShares, CpuQuota: cfg.Resources.CPUQuota, CpuPeriod: cfg.Resources.CPUPeriod,
				MemoryLimitInBytes: cfg.Resources.MemoryLimit,
			},
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{
					Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD,
				},
			},
		},
	}
	for _, e := range cfg.Env {
		cc.Envs = append(cc.Envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	for _, m := range cfg.Mounts {
		cc.Mounts = append(cc.Mounts, &runtimeapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, Readonly: m.ReadOnly})
	}
	resp, err := r.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID, Config: cc, SandboxConfig: r.sandboxConfig(sb)})
	if err != nil {
		return "", wrap("create container "+cfg.Name, err)
	}
	return resp.ContainerId, nil
}

// StartContainer implements container.Runtime.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	_, err := r.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	return wrap("start container", err)
}

// StopContainer implements container.Runtime: CRI sends the stop signal,
// waits grace (whole seconds, at least one), then kills.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	secs := int64((grace + time.Second - 1) / time.Second)
	_, err := r.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: max(secs, 1)})
	return wrap("stop container", err)
}

// RemoveContainer implements container.Runtime.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	_, err := r.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return wrap("remove container", err)
}

// ExecSync implements container.Runtime.
func (r *Runtime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*container.ExecResult, error) {
	secs := int64((timeout + time.Second - 1) / time.Second)
	resp, err := r.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: max(secs, 1)})
	if err != nil {
		return nil, wrap("exec sync", err)
	}
	return &container.ExecResult{Stdout: resp.Stdout, Stderr: resp.Stderr, ExitCode: resp.ExitCode}, nil
}

// Exec implements container.Runtime.
func (r *Runtime) Exec(ctx context.Context, req *container.ExecRequest) (string, error) {
	resp, err := r.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: req.ContainerID, Cmd: req.Cmd,
		Tty: req.TTY, Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr && !req.TTY})
	if err != nil {
		return "", wrap("exec", err)
	}
	return resp.Url, nil
}

// Attach implements container.Runtime.
func (r *Runtime) Attach(ctx context.Context, req *container.AttachRequest) (string, error) {
	resp, err := r.rt.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: req.ContainerID,
		Tty: req.TTY, Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr && !req.TTY})
	if err != nil {
		return "", wrap("attach", err)
	}
	return resp.Url, nil
}

// PortForward implements container.Runtime.
func (r *Runtime) PortForward(ctx context.Context, sandboxID string, ports []int32) (string, error) {
	resp, err := r.rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sandboxID, Port: ports})
	if err != nil {
		return "", wrap("port forward", err)
	}
	return resp.Url, nil
}

// UpdatePodCIDR implements container.Runtime.
func (r *Runtime) UpdatePodCIDR(ctx context.Context, cidr string) error {
	_, err := r.rt.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{
		RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}}})
	return wrap("update runtime config", err)
}
