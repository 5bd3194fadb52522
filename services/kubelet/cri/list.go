package cri

import (
	"context"
	"errors"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/kubelet/container"
)

func nanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func state(s runtimeapi.ContainerState) container.State {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return container.StateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return container.StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return container.StateExited
	}
	return container.StateUnknown
}

func sandboxOf(s *runtimeapi.PodSandbox) *container.Sandbox {
	sb := &container.Sandbox{ID: s.Id, CreatedAt: nanos(s.CreatedAt), State: container.SandboxNotReady}
	if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		sb.State = container.SandboxReady
	}
	if m := s.Metadata; m != nil {
		sb.PodUID, sb.Name, sb.Namespace, sb.Attempt = m.Uid, m.Name, m.Namespace, m.Attempt
	}
	return sb
}

func containerOf(c *runtimeapi.Container) *container.Container {
	out := &container.Container{ID: c.Id, SandboxID: c.PodSandboxId, State: state(c.State), CreatedAt: nanos(c.CreatedAt),
		ImageRef: c.ImageRef, Labels: c.Labels, Annotations: c.Annotations, PodUID: c.Labels[container.LabelPodUID]}
	if c.Image != nil {
		out.Image = c.Image.Image
	}
	if m := c.Metadata; m != nil {
		out.Name, out.Attempt = m.Name, m.Attempt
	}
	return out
}

// list returns the sandboxes and containers the kubelet made that match
// the extra label selector.
func (r *Runtime) list(ctx context.Context, sel map[string]string) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, error) {
	labels := map[string]string{container.LabelManagedBy: "true"}
	for k, v := range sel {
		labels[k] = v
	}
	sbs, err := r.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: labels}})
	if err != nil {
		return nil, nil, wrap("list pod sandboxes", err)
	}
	cs, err := r.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: labels}})
	if err != nil {
		return nil, nil, wrap("list containers", err)
	}
	return sbs.Items, cs.Containers, nil
}

// ListPods implements container.Runtime. It reports states from the CRI
// lists only (no exit codes, no IPs): enough to notice changes; PodStatus
// has the details.
func (r *Runtime) ListPods(ctx context.Context) (map[string]*container.PodStatus, error) {
	sbs, cs, err := r.list(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]*container.PodStatus{}
	get := func(uid string) *container.PodStatus {
		p, ok := out[uid]
		if !ok {
			p = &container.PodStatus{UID: uid}
			out[uid] = p
		}
		return p
	}
	for _, s := range sbs {
		sb := sandboxOf(s)
		p := get(sb.PodUID)
		p.Name, p.Namespace = sb.Name, sb.Namespace
		p.Sandboxes = append(p.Sandboxes, sb)
	}
	for _, c := range cs {
		cc := containerOf(c)
		p := get(cc.PodUID)
		if p.Name == "" {
			p.Name, p.Namespace = c.Labels[container.LabelPodName], c.Labels[container.LabelPodNamespace]
		}
		p.Containers = append(p.Containers, cc)
	}
	for _, p := range out {
		p.Sort()
	}
	return out, nil
}

// PodStatus implements container.Runtime: the pod's sandboxes with their
// IPs and its containers with exit codes, reasons and times.
func (r *Runtime) PodStatus(ctx context.Context, uid string) (*container.PodStatus, error) {
	sbs, cs, err := r.list(ctx, map[string]string{container.LabelPodUID: uid})
	if err != nil {
		return nil, err
	}
	p := &container.PodStatus{UID: uid}
	for _, s := range sbs {
		sb := sandboxOf(s)
		p.Name, p.Namespace = sb.Name, sb.Namespace
		if sb.State == container.SandboxReady {
			st, err := r.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: s.Id})
			if err != nil && !errors.Is(wrap("", err), container.ErrNotFound) {
				return nil, wrap("pod sandbox status", err)
			}
			if st != nil && st.Status != nil && st.Status.Network != nil && st.Status.Network.Ip != "" {
				sb.IPs = append(sb.IPs, st.Status.Network.Ip)
				for _, ip := range st.Status.Network.AdditionalIps {
					sb.IPs = append(sb.IPs, ip.Ip)
				}
			}
		}
		p.Sandboxes = append(p.Sandboxes, sb)
	}
	for _, c := range cs {
		cc := containerOf(c)
		st, err := r.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
		if err != nil {
			if errors.Is(wrap("", err), container.ErrNotFound) {
				continue
			}
			return nil, wrap("container status", err)
		}
		if s := st.Status; s != nil {
			cc.State = state(s.State)
			cc.StartedAt, cc.FinishedAt = nanos(s.StartedAt), nanos(s.FinishedAt)
			cc.ExitCode, cc.Reason, cc.Message = s.ExitCode, s.Reason, s.Message
			cc.LogPath = s.LogPath
			if s.ImageRef != "" {
				cc.ImageRef = s.ImageRef
			}
		}
		p.Containers = append(p.Containers, cc)
	}
	p.Sort()
	return p, nil
}
