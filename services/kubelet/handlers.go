package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
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
//
// Exec asks the runtime for a streaming URL and reverse-proxies the upgraded
// connection (SPDY or websocket) to it.
func (k *Kubelet) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", k.serveLogs)
	mux.HandleFunc("GET /exec/{namespace}/{pod}/{container}", k.serveExec)
	mux.HandleFunc("POST /exec/{namespace}/{pod}/{container}", k.serveExec)
	return mux
}

// errNotFound becomes a 404.
var errNotFound = errors.New("kubelet: not found")

// findContainer returns the pod and its newest container with that name
// (the one before it with previous).
func (k *Kubelet) findContainer(ctx context.Context, ns, name, cname string, previous bool) (*corev1.Pod, *container.Container, error) {
	pod, ok := k.pods.Get(ns, name)
	if !ok {
		return nil, nil, fmt.Errorf("%w: pod %s/%s on node %s", errNotFound, ns, name, k.cfg.NodeName)
	}
	rs, err := k.rt.PodStatus(ctx, string(pod.UID))
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
	q := r.URL.Query()
	cmd := q["command"]
	if len(cmd) == 0 {
		httpError(w, fmt.Errorf("%w: no command", errBadRequest))
		return
	}
	_, c, err := k.findContainer(r.Context(), r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"), false)
	if err != nil {
		httpError(w, err)
		return
	}
	if c.State != container.StateRunning {
		http.Error(w, fmt.Sprintf("container %s is not running", c.Name), http.StatusBadRequest)
		return
	}
	req := &container.ExecRequest{ContainerID: c.ID, Cmd: cmd, TTY: boolParam(q, "tty"),
		Stdin: boolParam(q, "stdin", "input"), Stdout: boolParam(q, "stdout", "output"), Stderr: boolParam(q, "stderr", "error")}
	raw, err := k.rt.Exec(r.Context(), req)
	if err != nil {
		httpError(w, err)
		return
	}
	target, err := url.Parse(raw)
	if err != nil {
		httpError(w, fmt.Errorf("exec: runtime returned URL %q: %w", raw, err))
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
			k.log.Warn("exec proxy", "err", err)
			http.Error(w, "exec: "+err.Error(), http.StatusBadGateway)
		},
	}
}
