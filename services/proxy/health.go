package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/services/netns"
)

// healthServer is kube-proxy's ServiceHealthServer: for every Service with
// externalTrafficPolicy Local and a healthCheckNodePort it serves HTTP on
// that port, on every address of the node's network namespace, so that a
// load balancer sends traffic only to nodes with an endpoint. Any path
// answers 200 when the node has a ready endpoint of the Service and the
// proxy's last Sync succeeded, else 503, with kube's JSON body (the
// Service, localEndpoints, serviceProxyHealthy). Its methods are safe for
// concurrent use.
type healthServer struct {
	netns   string // "" the process's own
	log     *slog.Logger
	healthy func() bool

	mu       sync.Mutex
	services map[types.NamespacedName]*healthInstance
	wg       sync.WaitGroup
}

type healthInstance struct {
	port      int32
	srv       *http.Server
	endpoints int // guarded by healthServer.mu
}

func newHealthServer(ns string, log *slog.Logger, healthy func() bool) *healthServer {
	return &healthServer{netns: ns, log: log, healthy: healthy, services: map[types.NamespacedName]*healthInstance{}}
}

// sync makes the servers those of checks: a Service gone or whose port
// changed is closed, a new one opened (a port that cannot be opened is
// logged and tried again at the next sync, as kube does), and the local
// endpoint counts are updated.
func (h *healthServer) sync(checks map[types.NamespacedName]HealthCheck) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, inst := range h.services {
		if hc, ok := checks[key]; !ok || hc.Port != inst.port {
			_ = inst.srv.Close()
			delete(h.services, key)
		}
	}
	for key, hc := range checks {
		inst := h.services[key]
		if inst == nil {
			var err error
			if inst, err = h.open(key, hc.Port); err != nil {
				h.log.Error("health check not served", "service", key, "port", hc.Port, "err", err)
				continue
			}
			h.services[key] = inst
		}
		inst.endpoints = hc.LocalEndpoints
	}
}

func (h *healthServer) open(key types.NamespacedName, port int32) (*healthInstance, error) {
	addr := net.JoinHostPort("0.0.0.0", strconv.Itoa(int(port)))
	var ln net.Listener
	var err error
	if h.netns == "" {
		ln, err = net.Listen("tcp", addr)
	} else {
		ln, err = netns.Listen(h.netns, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("proxy: health check %s: %w", key, err)
	}
	inst := &healthInstance{port: port}
	inst.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { h.serve(w, key, inst) })}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if err := inst.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.log.Error("health check server failed", "service", key, "err", err)
		}
	}()
	return inst, nil
}

func (h *healthServer) serve(w http.ResponseWriter, key types.NamespacedName, inst *healthInstance) {
	h.mu.Lock()
	count := inst.endpoints
	h.mu.Unlock()
	healthy := h.healthy()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if count != 0 && healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
		key.Namespace, key.Name, count, healthy)
}

// close closes every server and its connections, and waits for them.
func (h *healthServer) close() {
	h.mu.Lock()
	for key, inst := range h.services {
		_ = inst.srv.Close()
		delete(h.services, key)
	}
	h.mu.Unlock()
	h.wg.Wait()
}
