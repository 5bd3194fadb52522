package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/kubelet/container"
	"github.com/cairn-dev/cairn/services/kubelet/crilog"
)

// handler is the kubelet's HTTPS API, the part of the real kubelet's that
// the apiserver proxies to:
//
//	GET  /healthz
//	GET  /containerLogs/{namespace}/{pod}/{container}?follow=&previous=&tailLines=&timestamps=&sinceSeconds=&limitBytes=
//	GET|POST /exec/{namespace}/{pod}/{container}?command=...&stdin=&stdout=&stderr=&tty=
//	GET|POST /attach/{namespace}/{pod}/{container}?stdin=&stdout=&stderr=&tty=
//	GET|POST /portForward/{namespace}/{pod}?port=...
//
// Exec, attach and port forwarding ask the runtime for a streaming URL and
// reverse-proxy the upgraded connection (SPDY or websocket) to it.
func (k *Kubelet) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", k.serveLogs)
	mux.HandleFunc("GET /exec/{namespace}/{pod}/{container}", k.serveExec)
	mux.HandleFunc("POST /exec/{namespace}/{pod}/{container}", k.serveExec)
	mux.HandleFunc("GET /attach/{namespace}/{pod}/{container}", k.serveAttach)
	mux.HandleFunc("POST /attach/{namespace}/{pod}/{container}", k.serveAttach)
	mux.HandleFunc("GET /portForward/{namespace}/{pod}", k.servePortForward)
	mux.HandleFunc("POST /portForward/{namespace}/{pod}", k.servePortForward)
	return mux
}

// errNotFound becomes a 404.
var errNotFound = errors.New("kubelet: not found")

// findContainer returns the pod and its newest container with that name
// (the one before it with previous).
func (k *Kubelet) findContainer(ctx context.Context, ns, name, cname string, previous bool) (*corev1.Pod, *container.Container, error) {
	pod, rs, err := k.runtimePod(ctx, ns, name)
	if err != nil {
		return nil, nil, err
	}
	cs := rs.ContainersNamed(cname)
	if !previous {
		// The newest container, running or not: in back-off that is the
		// last run, as with kubelet.
		if len(cs) == 0 {
			return nil, nil, fmt.Errorf("%w: container %q in pod %q", errNotFound, cname, name)
		}
		return pod, cs[0], nil
	}
	// The previous run is the container of lastState.terminated, as kubelet
	// picks it: the newest one while the container waits in back-off, the
	// one before it once a new one runs.
	if id := lastTerminatedID(pod, cname); id != "" {
		for _, c := range cs {
			if strings.HasSuffix(id, "://"+c.ID) {
				return pod, c, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("%w: previous terminated container %q in pod %q", errNotFound, cname, name)
}

// runtimePod returns the pod of this node and what the runtime holds of it.
func (k *Kubelet) runtimePod(ctx context.Context, ns, name string) (*corev1.Pod, *container.PodStatus, error) {
	pod, ok := k.pods.Get(ns, name)
	if !ok {
		return nil, nil, fmt.Errorf("%w: pod %s/%s on node %s", errNotFound, ns, name, k.cfg.NodeName)
	}
	rs, err := k.rt.PodStatus(ctx, string(pod.UID))
	if err != nil {
		return nil, nil, err
	}
	return pod, rs, nil
}

// lastTerminatedID is the containerID of the container's
// lastState.terminated in the pod's status, "" if it has none.
func lastTerminatedID(pod *corev1.Pod, cname string) string {
	for _, st := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, cs := range st {
			if cs.Name == cname && cs.LastTerminationState.Terminated != nil {
				return cs.LastTerminationState.Terminated.ContainerID
			}
		}
	}
	return ""
}

func httpError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errNotFound), errors.Is(err, container.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, errBadRequest):
		code = http.StatusBadRequest
	}
	http.Error(w, err.Error(), code)
}

var errBadRequest = errors.New("kubelet: bad request")

func boolParam(q url.Values, names ...string) bool {
	for _, n := range names {
		if v := q.Get(n); v != "" {
			b, err := strconv.ParseBool(v)
			return err == nil && b
		}
	}
	return false
}

func (k *Kubelet) serveLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	previous := boolParam(q, "previous")
	_, c, err := k.findContainer(r.Context(), r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"), previous)
	if err != nil {
		httpError(w, err)
		return
	}
	if c.LogPath == "" {
		httpError(w, fmt.Errorf("%w: container %s has no log file", errNotFound, c.Name))
		return
	}
	o := crilog.Options{TailLines: -1, Timestamps: boolParam(q, "timestamps"), Follow: boolParam(q, "follow") && !previous}
	for name, dst := range map[string]*int64{"tailLines": &o.TailLines, "limitBytes": &o.LimitBytes} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				httpError(w, fmt.Errorf("%w: %s=%q", errBadRequest, name, v))
				return
			}
			*dst = n
		}
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			httpError(w, fmt.Errorf("%w: sinceSeconds=%q", errBadRequest, v))
			return
		}
		o.Since = k.now().Add(-time.Duration(n) * time.Second)
	}
	if o.Follow {
		id := c.ID
		o.Done = func() bool {
			rs, err := k.rt.PodStatus(context.WithoutCancel(r.Context()), c.PodUID)
			if err != nil {
				return true
			}
			for _, x := range rs.Containers {
				if x.ID == id {
					return x.State != container.StateRunning && x.State != container.StateCreated
				}
			}
			return true
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if err := crilog.Copy(r.Context(), w, c.LogPath, o); err != nil {
		k.log.Debug("container logs", "err", err)
	}
}

// serveExec prepares an exec through the runtime and proxies the client's
// upgrade request to the runtime's streaming server.
func (k *Kubelet) serveExec(w http.ResponseWriter, r *http.Request) {
	cmd := r.URL.Query()["command"]
	if len(cmd) == 0 {
		httpError(w, fmt.Errorf("%w: no command", errBadRequest))
		return
	}
	id, streams, ok := k.runningContainer(w, r)
	if !ok {
		return
	}
	raw, err := k.rt.Exec(r.Context(), &container.ExecRequest{ContainerID: id, Cmd: cmd,
		TTY: streams.TTY, Stdin: streams.Stdin, Stdout: streams.Stdout, Stderr: streams.Stderr})
	k.stream(w, r, "exec", raw, err)
}

// serveAttach attaches to the container's main process through the
// runtime, as serveExec runs a command.
func (k *Kubelet) serveAttach(w http.ResponseWriter, r *http.Request) {
	id, streams, ok := k.runningContainer(w, r)
	if !ok {
		return
	}
	streams.ContainerID = id
	raw, err := k.rt.Attach(r.Context(), &streams)
	k.stream(w, r, "attach", raw, err)
}

// runningContainer finds the running container the path names and the
// streams the query asks for (kube's names, and the older ones). ok false:
// it answered the request (404, or 400 when the container is not running).
func (k *Kubelet) runningContainer(w http.ResponseWriter, r *http.Request) (string, container.AttachRequest, bool) {
	_, c, err := k.findContainer(r.Context(), r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"), false)
	if err != nil {
		httpError(w, err)
		return "", container.AttachRequest{}, false
	}
	if c.State != container.StateRunning {
		http.Error(w, fmt.Sprintf("container %s is not running", c.Name), http.StatusBadRequest)
		return "", container.AttachRequest{}, false
	}
	q := r.URL.Query()
	return c.ID, container.AttachRequest{TTY: boolParam(q, "tty"), Stdin: boolParam(q, "stdin", "input"),
		Stdout: boolParam(q, "stdout", "output"), Stderr: boolParam(q, "stderr", "error")}, true
}

// servePortForward prepares a port forward into the pod's ready sandbox
// through the runtime and proxies the client's upgrade request to the
// runtime's streaming server, which dials the port inside the pod's
// network namespace. SPDY clients name the port of each stream in its
// headers; websocket clients name them in the query (port=).
func (k *Kubelet) servePortForward(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("pod")
	var ports []int32
	for _, v := range r.URL.Query()["port"] {
		p, err := strconv.ParseUint(v, 10, 16)
		if err != nil || p == 0 {
			httpError(w, fmt.Errorf("%w: port %q", errBadRequest, v))
			return
		}
		ports = append(ports, int32(p))
	}
	_, rs, err := k.runtimePod(r.Context(), ns, name)
	if err != nil {
		httpError(w, err)
		return
	}
	i := slices.IndexFunc(rs.Sandboxes, func(sb *container.Sandbox) bool { return sb.State == container.SandboxReady })
	if i < 0 {
		http.Error(w, fmt.Sprintf("pod %s has no running sandbox", name), http.StatusBadRequest)
		return
	}
	raw, err := k.rt.PortForward(r.Context(), rs.Sandboxes[i].ID, ports)
	k.stream(w, r, "port forward", raw, err)
}

// stream proxies r to raw, the streaming URL the runtime prepared for
// what (or answers err, the runtime's failure to prepare it).
func (k *Kubelet) stream(w http.ResponseWriter, r *http.Request, what, raw string, err error) {
	if err != nil {
		httpError(w, err)
		return
	}
	target, err := url.Parse(raw)
	if err != nil {
		httpError(w, fmt.Errorf("%s: runtime returned URL %q: %w", what, raw, err))
		return
	}
	k.streamProxy(target).ServeHTTP(w, r)
}

// streamProxy forwards a request, upgrades included, to the runtime's
// streaming URL, reached with StreamDial (it may live in the node's network
// namespace).
func (k *Kubelet) streamProxy(target *url.URL) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = target
			pr.Out.Host = target.Host
			pr.Out.Header.Del("Authorization")
		},
		Transport:     &http.Transport{DialContext: k.cfg.StreamDial, DisableKeepAlives: true},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			k.log.Warn("stream proxy", "err", err)
			http.Error(w, "stream: "+err.Error(), http.StatusBadGateway)
		},
	}
}
