package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/kubelet/container"
)

// Annotations the kubelet puts on containers it creates.
const (
	annotationRestartCount = "io.kubernetes.container.restartCount"
	annotationGrace        = "io.kubernetes.pod.terminationGracePeriod"
)

// startContainer pulls the image as the pull policy says, builds the
// container (env, mounts, limits), creates and starts it. A failure is
// recorded as the container's waiting reason (ErrImagePull,
// ImagePullBackOff, ErrImageNeverPull, CreateContainerConfigError,
// CreateContainerError, RunContainerError) and as a Failed event, and the
// round retries later.
func (k *Kubelet) startContainer(ctx context.Context, w *worker, pod *corev1.Pod, rs *container.PodStatus, c *corev1.Container, attempt uint32, log *slog.Logger) time.Duration {
	ref, next, ok := k.ensureImage(ctx, w, pod, c)
	if !ok {
		return next
	}
	sb := rs.Sandbox()
	cfg, err := k.containerConfig(ctx, pod, c, attempt, ref, sb)
	if err != nil {
		return k.failContainer(ctx, w, pod, c.Name, "CreateContainerConfigError", err, retryAfter*5)
	}
	sbCfg, err := k.sandboxConfig(pod, sb.Attempt)
	if err != nil {
		return k.failContainer(ctx, w, pod, c.Name, "CreateContainerConfigError", err, retryAfter*5)
	}
	id, err := k.rt.CreateContainer(ctx, sb.ID, sbCfg, cfg)
	if err != nil {
		return k.failContainer(ctx, w, pod, c.Name, "CreateContainerError", err, retryAfter*5)
	}
	k.containerEventf(ctx, pod, c.Name, corev1.EventTypeNormal, ReasonCreated, "Created container: %s", c.Name)
	if d := k.runContainer(ctx, w, pod, c.Name, id); d > 0 {
		return d
	}
	log.Debug("container started", "container", c.Name, "attempt", attempt, "id", id)
	return 0
}

// runContainer starts a created container and records it; a failure
// waits with RunContainerError and retries after retryAfter.
func (k *Kubelet) runContainer(ctx context.Context, w *worker, pod *corev1.Pod, name, id string) time.Duration {
	if err := k.rt.StartContainer(ctx, id); err != nil {
		return k.failContainer(ctx, w, pod, name, "RunContainerError", err, retryAfter)
	}
	w.clearWaiting(name)
	k.containerEventf(ctx, pod, name, corev1.EventTypeNormal, ReasonStarted, "Started container %s", name)
	return 0
}

// failContainer makes the container wait with reason and records the
// kubelet's Failed event; it returns retry.
func (k *Kubelet) failContainer(ctx context.Context, w *worker, pod *corev1.Pod, name, reason string, err error, retry time.Duration) time.Duration {
	w.setWaiting(name, reason, err.Error())
	k.containerEventf(ctx, pod, name, corev1.EventTypeWarning, ReasonFailed, "Error: %v", err)
	return retry
}

// ensureImage honours imagePullPolicy (Always; IfNotPresent, the default
// for tagged images; Never) with a pull back-off per image, as the kubelet's
// image manager does, and records its events (Pulling, Pulled, Failed,
// BackOff, ErrImageNeverPull).
func (k *Kubelet) ensureImage(ctx context.Context, w *worker, pod *corev1.Pod, c *corev1.Container) (string, time.Duration, bool) {
	start := k.now()
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = corev1.PullIfNotPresent
	}
	// imageFailed makes the container wait with reason and msg, and
	// records the event the kubelet's container start adds: "Error:
	// <reason>".
	imageFailed := func(reason, msg string) {
		w.setWaiting(c.Name, reason, msg)
		k.containerEventf(ctx, pod, c.Name, corev1.EventTypeWarning, ReasonFailed, "Error: %s", reason)
	}
	present, err := k.rt.ImageRef(ctx, c.Image)
	if err != nil {
		k.containerEventf(ctx, pod, c.Name, corev1.EventTypeWarning, ReasonInspectFailed, "Failed to inspect image %q: %v", c.Image, err)
		imageFailed("ImageInspectError", err.Error())
		return "", retryAfter * 5, false
	}
	switch {
	case policy == corev1.PullNever && present == "":
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		k.containerEventf(ctx, pod, c.Name, corev1.EventTypeWarning, ReasonErrImageNeverPull, "%s", msg)
		imageFailed("ErrImageNeverPull", msg)
		return "", retryAfter * 5, false
	case policy == corev1.PullNever, policy == corev1.PullIfNotPresent && present != "":
		k.containerEventf(ctx, pod, c.Name, corev1.EventTypeNormal, ReasonPulled, "Container image %q already present on machine", c.Image)
		return present, 0, true
	}
	key := "image/" + c.Image
	if in, end := k.pulls.inBackOffSinceUpdate(key); in {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		k.containerEventf(ctx, pod, c.Name, corev1.EventTypeNormal, ReasonBackOff, "%s", msg)
		imageFailed("ImagePullBackOff", msg)
		return "", end.Sub(k.now()), false
	}
	k.containerEventf(ctx, pod, c.Name, corev1.EventTypeNormal, ReasonPulling, "Pulling image %q", c.Image)
	pullStart := k.now()
	img, err := k.rt.PullImage(ctx, c.Image)
	if err != nil {
		k.pulls.next(key, k.now())
		k.containerEventf(ctx, pod, c.Name, corev1.EventTypeWarning, ReasonFailed, "Failed to pull image %q: %v", c.Image, err)
		msg := err.Error()
		if errors.Is(err, container.ErrImagePull) {
			msg = fmt.Sprintf("failed to pull image %q: %v", c.Image, err)
		}
		imageFailed("ErrImagePull", msg)
		// Look again within the back-off, which then shows
		// ImagePullBackOff, as the kubelet's next sync does.
		return "", min(retryAfter, k.pulls.delay(key)/2), false
	}
	now := k.now()
	k.containerEventf(ctx, pod, c.Name, corev1.EventTypeNormal, ReasonPulled, "%s",
		pulledMessage(c.Image, now.Sub(pullStart), now.Sub(start), img.Size))
	return img.Ref, 0, true
}

// logDir is where a pod's container logs go, as the kubelet lays them out
// under /var/log/pods.
func (k *Kubelet) logDir(namespace, name, uid string) string {
	return filepath.Join(k.cfg.RootDir, "logs", "pods", namespace+"_"+name+"_"+uid)
}

// sandboxConfig describes pod's sandbox: hostname, resolver configuration
// (an unreadable node resolv.conf is an error), log directory, labels,
// annotations and host ports.
func (k *Kubelet) sandboxConfig(pod *corev1.Pod, attempt uint32) (*container.SandboxConfig, error) {
	host, _ := k.hostnameAndDomain(pod)
	sc := &container.SandboxConfig{
		PodUID: string(pod.UID), Name: pod.Name, Namespace: pod.Namespace, Attempt: attempt,
		Hostname: host, Labels: map[string]string{}, Annotations: map[string]string{},
	}
	dnsConf, err := k.podDNS(pod)
	if err != nil {
		return nil, err
	}
	sc.DNS = dnsConf
	if !k.info.Simulated {
		sc.LogDirectory = k.logDir(pod.Namespace, pod.Name, string(pod.UID))
	}
	for k, v := range pod.Labels {
		sc.Labels[k] = v
	}
	for k, v := range pod.Annotations {
		sc.Annotations[k] = v
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := string(p.Protocol)
			if proto == "" {
				proto = "TCP"
			}
			sc.PortMappings = append(sc.PortMappings, container.PortMapping{
				Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIP: p.HostIP})
		}
	}
	return sc, nil
}

// containerConfig builds what the runtime needs to create c.
func (k *Kubelet) containerConfig(ctx context.Context, pod *corev1.Pod, c *corev1.Container, attempt uint32, imageRef string, sb *container.Sandbox) (*container.ContainerConfig, error) {
	grace := int64(30)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	cfg := &container.ContainerConfig{
		Name: c.Name, Attempt: attempt, Image: imageRef, ImageName: c.Image,
		WorkingDir: c.WorkingDir, Stdin: c.Stdin, TTY: c.TTY,
		LogPath:   filepath.Join(c.Name, strconv.Itoa(int(attempt))+".log"),
		Resources: linuxResources(c),
		Labels:    map[string]string{},
		Annotations: map[string]string{
			annotationRestartCount: strconv.Itoa(int(attempt)),
			annotationGrace:        strconv.FormatInt(grace, 10),
		},
	}
	if k.info.Simulated {
		cfg.Command, cfg.Args = c.Command, c.Args
		return cfg, nil
	}
	env, err := k.resolveEnv(ctx, pod, c, sb)
	if err != nil {
		return nil, err
	}
	cfg.Env = env
	cfg.Command, cfg.Args = expandAll(c.Command, env), expandAll(c.Args, env)
	mounts, err := k.mounts(pod, c)
	if err != nil {
		return nil, err
	}
	hosts, err := k.hostsMount(pod, c, sb)
	if err != nil {
		return nil, err
	}
	if hosts != nil {
		mounts = append(mounts, *hosts)
	}
	cfg.Mounts = mounts
	return cfg, nil
}

// linuxResources turns limits (or requests, for cpu shares) into cgroup
// settings, as the kubelet's kuberuntime does: shares from the cpu request
// (or limit), a CFS quota from the cpu limit, the memory limit in bytes.
func linuxResources(c *corev1.Container) container.Resources {
	const period = 100000
	var r container.Resources
	cpuReq := c.Resources.Requests.Cpu()
	if cpuReq.IsZero() {
		cpuReq = c.Resources.Limits.Cpu()
	}
	r.CPUShares = 2
	if m := cpuReq.MilliValue(); m > 0 {
		r.CPUShares = max(m*1024/1000, 2)
	}
	if m := c.Resources.Limits.Cpu().MilliValue(); m > 0 {
		r.CPUPeriod = period
		r.CPUQuota = max(m*period/1000, 1000)
	}
	if m := c.Resources.Limits.Memory().Value(); m > 0 {
		r.MemoryLimit = m
	}
	return r
}
