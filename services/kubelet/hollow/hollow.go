package hollow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/services/kubelet/container"
)

// Config configures a hollow runtime.
type Config struct {
	// StartDelay is how long RunSandbox takes: the time a real node spends
	// pulling images and setting up networking.
	StartDelay time.Duration
	// PodCIDR is where pod addresses come from until UpdatePodCIDR; empty
	// means 10.244.0.0/24.
	PodCIDR string
	// Clock is the time source; nil is time.Now.
	Clock func() time.Time
}

// Runtime is the hollow runtime. The zero value is not usable; use New.
type Runtime struct {
	cfg Config

	mu         sync.Mutex
	seq        int
	prefix     netip.Prefix
	nextIP     netip.Addr
	sandboxes  map[string]*container.Sandbox
	containers map[string]*container.Container
	// plans are the sandboxes whose pod asked its containers to exit on
	// their own (AnnotationExitAfter).
	plans  map[string]exitPlan
	notify func(podUID string)
}

// Annotations of a pod that make its hollow containers exit on their own,
// so that Jobs complete (or fail) on hollow nodes as KWOK's stages make
// them: every container of the pod exits AnnotationExitAfter (a Go
// duration, "0s" at once) after it starts, with AnnotationExitCode (0 when
// absent: reason Completed; else reason Error). Values that do not parse
// are ignored: the containers run until stopped, as without them.
const (
	AnnotationExitAfter = "hollow.cairn.dev/exit-after"
	AnnotationExitCode  = "hollow.cairn.dev/exit-code"
)

type exitPlan struct {
	after time.Duration
	code  int32
}

func planFor(annotations map[string]string) (exitPlan, bool) {
	after, err := time.ParseDuration(annotations[AnnotationExitAfter])
	if err != nil || after < 0 {
		return exitPlan{}, false
	}
	p := exitPlan{after: after}
	if v, ok := annotations[AnnotationExitCode]; ok {
		code, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return exitPlan{}, false
		}
		p.code = int32(code)
	}
	return p, true
}

var (
	_ container.Runtime  = (*Runtime)(nil)
	_ container.Notifier = (*Runtime)(nil)
)

// SetNotify implements container.Notifier: f hears of containers that
// exit on their own (AnnotationExitAfter).
func (r *Runtime) SetNotify(f func(podUID string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notify = f
}

// New returns a hollow runtime.
func New(cfg Config) (*Runtime, error) {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.PodCIDR == "" {
		cfg.PodCIDR = "10.244.0.0/24"
	}
	r := &Runtime{cfg: cfg, sandboxes: map[string]*container.Sandbox{}, containers: map[string]*container.Container{}, plans: map[string]exitPlan{}}
	if err := r.setCIDR(cfg.PodCIDR); err != nil {
		return nil, fmt.Errorf("hollow: new: %w", err)
	}
	return r, nil
}

func (r *Runtime) setCIDR(cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return fmt.Errorf("pod CIDR: %w", err)
	}
	r.prefix = p.Masked()
	r.nextIP = r.prefix.Addr().Next()
	return nil
}

func (r *Runtime) newID(kind string) string {
	r.seq++
	return kind + "-" + strconv.Itoa(r.seq)
}

// Info implements container.Runtime.
func (r *Runtime) Info(context.Context) (container.Info, error) {
	return container.Info{Name: "hollow", Version: "0.1.0", Simulated: true}, nil
}

// RunSandbox implements container.Runtime: after StartDelay the sandbox is
// ready with the next address of the pod CIDR.
func (r *Runtime) RunSandbox(ctx context.Context, cfg *container.SandboxConfig) (string, error) {
	if d := r.cfg.StartDelay; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("hollow: run sandbox: %w", ctx.Err())
		case <-t.C:
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ip := r.nextIP
	r.nextIP = ip.Next()
	if !r.prefix.Contains(r.nextIP) {
		r.nextIP = r.prefix.Addr().Next()
	}
	id := r.newID("sandbox")
	r.sandboxes[id] = &container.Sandbox{
		ID: id, PodUID: cfg.PodUID, Name: cfg.Name, Namespace: cfg.Namespace, Attempt: cfg.Attempt,
		State: container.SandboxReady, IPs: []string{ip.String()}, CreatedAt: r.cfg.Clock(),
	}
	if p, ok := planFor(cfg.Annotations); ok {
		r.plans[id] = p
	}
	return id, nil
}

// StopSandbox implements container.Runtime.
func (r *Runtime) StopSandbox(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, ok := r.sandboxes[id]
	if !ok {
		return fmt.Errorf("hollow: stop sandbox %s: %w", id, container.ErrNotFound)
	}
	sb.State = container.SandboxNotReady
	for _, c := range r.containers {
		if c.SandboxID == id {
			r.exit(c, 137, "Error")
		}
	}
	return nil
}

// RemoveSandbox implements container.Runtime.
func (r *Runtime) RemoveSandbox(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sandboxes[id]; !ok {
		return fmt.Errorf("hollow: remove sandbox %s: %w", id, container.ErrNotFound)
	}
	delete(r.sandboxes, id)
	delete(r.plans, id)
	for cid, c := range r.containers {
		if c.SandboxID == id {
			delete(r.containers, cid)
		}
	}
	return nil
}

// ImageRef implements container.Runtime: every image is present.
func (r *Runtime) ImageRef(_ context.Context, image string) (string, error) {
	return imageRef(image), nil
}

// PullImage implements container.Runtime: every pull succeeds.
func (r *Runtime) PullImage(_ context.Context, image string) (container.Image, error) {
	return container.Image{Ref: imageRef(image)}, nil
}

func imageRef(image string) string { return "hollow://" + image }

// CreateContainer implements container.Runtime.
func (r *Runtime) CreateContainer(_ context.Context, sandboxID string, _ *container.SandboxConfig, cfg *container.ContainerConfig) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, ok := r.sandboxes[sandboxID]
	if !ok || sb.State != container.SandboxReady {
		return "", fmt.Errorf("hollow: create container %s: sandbox %s: %w", cfg.Name, sandboxID, container.ErrNotFound)
	}
	id := r.newID("container")
	r.containers[id] = &container.Container{
		ID: id, SandboxID: sandboxID, PodUID: sb.PodUID, Name: cfg.Name, Attempt: cfg.Attempt,
		State: container.StateCreated, Image: cfg.ImageName, ImageRef: cfg.Image, CreatedAt: r.cfg.Clock(),
		Labels: maps.Clone(cfg.Labels), Annotations: maps.Clone(cfg.Annotations),
	}
	return id, nil
}

// StartContainer implements container.Runtime.
func (r *Runtime) StartContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("hollow: start container %s: %w", id, container.ErrNotFound)
	}
	if c.State != container.StateCreated {
		return fmt.Errorf("hollow: start container %s: state %s", id, c.State)
	}
	c.State, c.StartedAt = container.StateRunning, r.cfg.Clock()
	if p, ok := r.plans[c.SandboxID]; ok {
		time.AfterFunc(p.after, func() { r.exitOnItsOwn(id, p.code) })
	}
	return nil
}

// exitOnItsOwn ends a running container as its process exiting would, and
// tells the notify function.
func (r *Runtime) exitOnItsOwn(id string, code int32) {
	r.mu.Lock()
	c, ok := r.containers[id]
	if !ok || c.State != container.StateRunning {
		r.mu.Unlock()
		return
	}
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	r.exit(c, code, reason)
	uid, notify := c.PodUID, r.notify
	r.mu.Unlock()
	if notify != nil {
		notify(uid)
	}
}

// StopContainer implements container.Runtime: the container exits at once,
// as a process that handles SIGTERM would.
func (r *Runtime) StopContainer(_ context.Context, id string, _ time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("hollow: stop container %s: %w", id, container.ErrNotFound)
	}
	r.exit(c, 0, "Completed")
	return nil
}

func (r *Runtime) exit(c *container.Container, code int32, reason string) {
	if c.State == container.StateExited {
		return
	}
	if c.State == container.StateCreated {
		code, reason = 128, "Error"
	}
	c.State, c.ExitCode, c.Reason, c.FinishedAt = container.StateExited, code, reason, r.cfg.Clock()
}

// RemoveContainer implements container.Runtime.
func (r *Runtime) RemoveContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.containers[id]; !ok {
		return fmt.Errorf("hollow: remove container %s: %w", id, container.ErrNotFound)
	}
	delete(r.containers, id)
	return nil
}

// ListPods implements container.Runtime.
func (r *Runtime) ListPods(context.Context) (map[string]*container.PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]*container.PodStatus{}
	get := func(uid string) *container.PodStatus {
		p, ok := out[uid]
		if !ok {
			p = &container.PodStatus{UID: uid}
			out[uid] = p
		}
		return p
	}
	for _, sb := range r.sandboxes {
		p := get(sb.PodUID)
		p.Name, p.Namespace = sb.Name, sb.Namespace
		cp := *sb
		p.Sandboxes = append(p.Sandboxes, &cp)
	}
	for _, c := range r.containers {
		cp := *c
		get(c.PodUID).Containers = append(get(c.PodUID).Containers, &cp)
	}
	for _, p := range out {
		p.Sort()
	}
	return out, nil
}

// PodStatus implements container.Runtime.
func (r *Runtime) PodStatus(_ context.Context, uid string) (*container.PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &container.PodStatus{UID: uid}
	for _, sb := range r.sandboxes {
		if sb.PodUID == uid {
			cp := *sb
			p.Name, p.Namespace = sb.Name, sb.Namespace
			p.Sandboxes = append(p.Sandboxes, &cp)
		}
	}
	for _, c := range r.containers {
		if c.PodUID == uid {
			cp := *c
			p.Containers = append(p.Containers, &cp)
		}
	}
	p.Sort()
	return p, nil
}

// ExecSync implements container.Runtime: every command succeeds with no
// output.
func (r *Runtime) ExecSync(_ context.Context, id string, _ []string, _ time.Duration) (*container.ExecResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok || c.State != container.StateRunning {
		return nil, fmt.Errorf("hollow: exec in %s: %w", id, container.ErrNotFound)
	}
	return &container.ExecResult{}, nil
}

// ErrNoStreaming is returned by Exec, Attach and PortForward: hollow
// containers have no processes to attach to, and hollow pods no network.
var ErrNoStreaming = errors.New("hollow: no streaming on hollow nodes")

// Exec implements container.Runtime.
func (r *Runtime) Exec(context.Context, *container.ExecRequest) (string, error) {
	return "", ErrNoStreaming
}

// Attach implements container.Runtime.
func (r *Runtime) Attach(context.Context, *container.AttachRequest) (string, error) {
	return "", ErrNoStreaming
}

// PortForward implements container.Runtime.
func (r *Runtime) PortForward(context.Context, string, []int32) (string, error) {
	return "", ErrNoStreaming
}

// UpdatePodCIDR implements container.Runtime: later sandboxes get addresses
// from cidr.
func (r *Runtime) UpdatePodCIDR(_ context.Context, cidr string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cidr == "" || cidr == r.prefix.String() {
		return nil
	}
	if err := r.setCIDR(cidr); err != nil {
		return fmt.Errorf("hollow: update pod CIDR: %w", err)
	}
	return nil
}
