package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/policy"
	"github.com/cairn-dev/cairn/services/apiserver/servicealloc"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
	"github.com/cairn-dev/cairn/services/apiserver/webhook"
)

// Config is everything the apiserver needs. Store, Registry and Hub are
// required.
type Config struct {
	// Listen is host:port; empty means 127.0.0.1:6443.
	Listen string
	// TLS is the serving configuration (certificate, client CAs). Nil serves
	// plain HTTP, for tests only.
	TLS *tls.Config
	// KubeletClientTLS is how the apiserver reaches kubelets for pods/log
	// and pods/exec: its client certificate, which kubelets authenticate
	// and must authorize for nodes/proxy (pki.KubeletClientTLSConfig:
	// kube-apiserver-kubelet-client in system:masters), and RootCAs to
	// verify kubelets if they have certificates from a known CA. Nil
	// connects without a client certificate (cairn's kubelets answer 401)
	// and without verifying.
	KubeletClientTLS *tls.Config

	Store    *storage.Store
	Registry *schemas.Registry
	// Hub serves watches from the log.
	Hub *watchhub.Hub

	Authenticator Authenticator
	// APIAudiences are the apiserver's own token audiences (kube's
	// --api-audiences, by default the service-account issuer): a
	// TokenReview without audiences asks for them, and tokens without
	// audiences of their own (static, bootstrap) are only for them.
	APIAudiences []string
	Authorizer   Authorizer
	// Admission runs, in order, after decoding and before validation,
	// and after the built-in plugins (admission.go).
	Admission []AdmissionPlugin
	// Webhooks calls the cluster's admission webhooks (webhooks.go); nil
	// calls none.
	Webhooks *webhook.Dispatcher
	// Policies evaluates ValidatingAdmissionPolicies (package policy)
	// before the validating webhooks; nil evaluates none.
	Policies *policy.Policies
	// NotReadyTolerationSeconds and UnreachableTolerationSeconds are the
	// tolerationSeconds of the tolerations the DefaultTolerationSeconds
	// admission plugin gives pods (kube-apiserver's
	// --default-not-ready-toleration-seconds and
	// --default-unreachable-toleration-seconds). Nil means 300, kube's
	// default; 0 is kept (evict at once).
	NotReadyTolerationSeconds    *int64
	UnreachableTolerationSeconds *int64
	// ServiceIPs and NodePorts are the ranges Services get their cluster
	// IPs and node ports from (kube-apiserver's --service-cluster-ip-range
	// and --service-node-port-range); zero values are 10.96.0.0/12 and
	// 30000-32767.
	ServiceIPs servicealloc.IPRange
	NodePorts  servicealloc.PortRange
	// SyncCustom, if set, waits until the registry serves every
	// CustomResourceDefinition committed before the call (crds.Controller.Sync):
	// a request for an unknown resource of a named group waits for it
	// before answering 404, so that a kind defined a moment ago through
	// another apiserver is found.
	SyncCustom func(ctx context.Context) error
	// UnservableCustom, if set, says why the custom resource of a named
	// group that the registry does not serve cannot be served although
	// its definition's names are accepted (crds.Controller.Unservable);
	// such a request is answered as kube's CRD handler answers it, 500
	// "error resolving resource", instead of 404.
	UnservableCustom func(group, version, resource string) error
	// Tokens signs the tokens of serviceaccounts/token (TokenRequest); nil
	// serves no tokens (404).
	Tokens TokenIssuer
	// MaxTokenExpiration caps the lifetime of requested tokens
	// (kube-apiserver's --service-account-max-token-expiration); 0 means
	// no cap besides validation's 2^32 seconds.
	MaxTokenExpiration time.Duration
	// NoTokenExtension turns off the extension of the admission plugin's
	// pod tokens (kube-apiserver's --service-account-extend-token-expiration=false).
	NoTokenExtension bool
	// Discovery serves /api, /apis and the group-version documents.
	Discovery http.Handler
	// Extra handlers mounted at exact paths (e.g. /openapi/, discovery).
	Extra map[string]http.Handler
	// Metrics registers the request metrics; nil uses a private registry.
	// /metrics serves it and k8s.io/component-base's legacy registry (the
	// APF metrics of k8s.io/apiserver register there).
	Metrics *prometheus.Registry
	// FlowControl, if set, is API Priority and Fairness (flowcontrol.go):
	// utilflowcontrol.New's config controller, run by the caller.
	FlowControl utilflowcontrol.Interface
	// ReadyChecks are /readyz's checks besides ping, each reported by name
	// as kube-apiserver does ("[+]etcd ok", "[-]log failed: reason"):
	// /readyz answers 200 only when all pass.
	ReadyChecks []ReadyCheck
	// Version is served on /version.
	Version VersionInfo
	// RequestTimeout bounds every request that is not long-running
	// (kube-apiserver's --request-timeout; long-running are watches,
	// proxy, and log, exec, attach and portforward): its context gets the
	// deadline, and a request not answered by then is answered 504
	// Timeout. A request's timeout query parameter may ask for less. Zero
	// means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// LogBackpressure holds a write (but a Lease's or a Node's) while the
	// oldest write of this apiserver that its watch hub has not yet seen
	// on the log is older than this (loggate.go). 0 means
	// DefaultLogBackpressure; below 0 never holds.
	LogBackpressure time.Duration
	// DisableProfiling turns off /debug/pprof/ (kube-apiserver's
	// --profiling=false): Go's profiles of the process, for whoever may
	// get that non-resource URL (cluster-admin).
	DisableProfiling bool

	Log *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Server is the Kubernetes-compatible API server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	store   *storage.Store
	reg     *schemas.Registry
	hub     *watchhub.Hub
	mux     *http.ServeMux
	metrics *requestMetrics
	now     func() time.Time
	nsCache *namespaceCache
	binds   bindCache  // see bindcache.go
	writes  writeCache // see writecache.go
	gate    *logGate   // see loggate.go; nil holds nothing
	// services allocates Services' cluster IPs and node ports.
	services *servicealloc.Allocator
	fields   fieldManagers // server-side apply, see apply.go

	// watches tracks open watch handlers so Run can wait for them.
	watches sync.WaitGroup
	// timeouts runs requests under their deadline (timeout.go); its
	// WaitGroup tracks their handlers, which may outlive them.
	timeouts timeoutFilter
	handlers sync.WaitGroup
	// authorized is authorization and routing, behind APF.
	authorized http.Handler
}

// New builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Registry == nil || cfg.Hub == nil {
		return nil, errors.New("apiserver: Store, Registry and Hub are required")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:6443"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Authenticator == nil {
		cfg.Authenticator = X509Authenticator{}
	}
	if cfg.Authorizer == nil {
		cfg.Authorizer = MastersAuthorizer{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.NotReadyTolerationSeconds == nil {
		cfg.NotReadyTolerationSeconds = ptr.To(DefaultTolerationSeconds)
	}
	if cfg.UnreachableTolerationSeconds == nil {
		cfg.UnreachableTolerationSeconds = ptr.To(DefaultTolerationSeconds)
	}
	s := &Server{
		cfg:   cfg,
		log:   cfg.Log,
		store: cfg.Store,
		reg:   cfg.Registry,
		hub:   cfg.Hub,
		mux:   http.NewServeMux(),
		now:   cfg.Now,
	}
	if cfg.ServiceIPs.Size() == 0 {
		cfg.ServiceIPs = servicealloc.MustParseIPRange(servicealloc.DefaultClusterIPRange)
	}
	if cfg.NodePorts.Size == 0 {
		cfg.NodePorts = servicealloc.MustParsePortRange(servicealloc.DefaultNodePortRange)
	}
	s.cfg = cfg
	s.timeouts = timeoutFilter{late: &s.handlers, log: cfg.Log}
	s.services = servicealloc.New(cfg.Store.Client(), cfg.ServiceIPs, cfg.NodePorts)
	s.nsCache = newNamespaceCache(s.store, 2*time.Second, cfg.Now)
	m, err := newRequestMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if s.gate, err = newLogGate(cfg.Hub, cfg.LogBackpressure, cfg.Now, cfg.Metrics); err != nil {
		return nil, err
	}
	if s.gate != nil {
		cfg.Store.OnCommit(s.gate.committed)
	}
	s.routes()
	s.authorized = s.flowControlled(http.HandlerFunc(s.authorizeAndServe))
	return s, nil
}

func (s *Server) routes() {
	s.mux.HandleFunc("/healthz", s.health(false))
	s.mux.HandleFunc("/livez", s.health(false))
	s.mux.HandleFunc("/readyz", s.health(true))
	s.mux.HandleFunc("/version", s.version)
	s.mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{s.cfg.Metrics, legacyregistry.DefaultGatherer}, promhttp.HandlerOpts{}))
	if !s.cfg.DisableProfiling {
		s.mux.HandleFunc("/debug/pprof/", pprof.Index)
		s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	for p, h := range s.cfg.Extra {
		s.mux.Handle(p, h)
	}
	if s.cfg.Discovery != nil {
		s.mux.Handle("/api", s.cfg.Discovery)
		s.mux.Handle("/apis", s.cfg.Discovery)
	}
	s.handleReviews()
	s.mux.HandleFunc("/api/", s.serveAPI)
	s.mux.HandleFunc("/apis/", s.serveAPI)
}

// Handler is the full handler chain: audit id, the request deadline,
// authentication, authorization, metrics, then routing.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		auditID := r.Header.Get("Audit-ID")
		if auditID == "" {
			auditID = uuid.NewString()
		}
		w.Header().Set("Audit-Id", auditID)
		info := parseRequestInfo(r)
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			if info.Verb != "watch" {
				s.metrics.observe(info, rec.code, time.Since(start))
			}
		}()
		serve := func(w http.ResponseWriter, r *http.Request) { s.authenticateAndServe(w, r, info, auditID) }
		if isLongRunning(r, info) {
			serve(rec, r)
			return
		}
		// Outside authentication, as kube's WithRequestDeadline and
		// WithTimeoutForNonLongRunningRequests: a bad timeout is a 400
		// for anyone, and authenticators that call out are bounded too.
		deadline, err := s.requestDeadline(r, start)
		if err != nil {
			writeStatus(rec, err)
			return
		}
		ctx, cancel := context.WithDeadline(r.Context(), deadline)
		defer cancel()
		s.timeouts.serve(rec, r.WithContext(ctx), serve)
	})
}

// authenticateAndServe authenticates the request (and its impersonation)
// and hands it on to flow control, authorization and routing.
func (s *Server) authenticateAndServe(w http.ResponseWriter, r *http.Request, info requestInfo, auditID string) {
	u, ok, err := s.cfg.Authenticator.Authenticate(r)
	switch {
	case err != nil:
		writeStatus(w, apierrors.NewUnauthorized(err.Error()))
		return
	case !ok && publicPath(r.URL.Path):
		u = User{User: UserAnonymous, Groups: []string{"system:unauthenticated"}}
	case !ok:
		writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
		return
	default:
		u.Groups = appendIfMissing(u.Groups, GroupAuthenticated)
	}
	if u, err = s.impersonate(r.Context(), r, u); err != nil {
		writeStatus(w, err)
		return
	}
	ctx := context.WithValue(r.Context(), userKey, u)
	ctx = context.WithValue(ctx, infoKey, info)
	ctx = context.WithValue(ctx, auditKey, auditID)
	s.authorized.ServeHTTP(w, r.WithContext(ctx))
}

// authorizeAndServe authorizes the request of the user and info in its
// context, then routes it.
func (s *Server) authorizeAndServe(w http.ResponseWriter, r *http.Request) {
	u, _ := r.Context().Value(userKey).(User)
	info, _ := r.Context().Value(infoKey).(requestInfo)
	attrs := Attributes{User: u, Verb: info.Verb, Path: r.URL.Path}
	if info.IsResourceRequest {
		attrs = Attributes{User: u, Verb: info.Verb, APIGroup: info.APIGroup, Resource: info.Resource,
			Subresource: info.Subresource, Namespace: info.Namespace, Name: info.Name}
	}
	if allowed, reason := s.cfg.Authorizer.Authorize(r.Context(), attrs); !allowed {
		writeStatus(w, forbidden(info, u, reason))
		return
	}
	s.mux.ServeHTTP(w, r)
}

func forbidden(info requestInfo, u User, reason string) error {
	if !info.IsResourceRequest {
		return apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("User %q cannot %s path %q", u.User, info.Verb, info.Path))
	}
	return forbiddenAttrs(Attributes{User: u, Verb: info.Verb, APIGroup: info.APIGroup, Resource: info.Resource,
		Subresource: info.Subresource, Namespace: info.Namespace, Name: info.Name}, reason)
}

func appendIfMissing(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// Run serves until ctx is done, then shuts down gracefully (open watches are
// closed). ready is called once the listener is bound.
func (s *Server) Run(ctx context.Context, ready func()) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("apiserver: listen %s: %w", s.cfg.Listen, err)
	}
	return s.Serve(ctx, ln, ready)
}

// Serve is Run on an existing listener.
func (s *Server) Serve(ctx context.Context, ln net.Listener, ready func()) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if s.cfg.TLS != nil {
		// HTTP/2 as Kubernetes serves it: clients multiplex their requests
		// on one connection instead of a TLS handshake per connection
		// beyond their idle pool. http.Server.Serve (unlike ServeTLS) only
		// speaks it when the config offers it through ALPN.
		tc := s.cfg.TLS.Clone()
		if len(tc.NextProtos) == 0 {
			tc.NextProtos = []string{"h2", "http/1.1"}
		}
		srv.TLSConfig = tc
		ln = tls.NewListener(ln, tc)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if ready != nil {
		ready()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("apiserver: serve: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	<-errc
	s.watches.Wait()
	s.handlers.Wait()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("apiserver: shutdown: %w", err)
	}
	return nil
}

// ReadyCheck is one named check of /readyz.
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

func (s *Server) health(readiness bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		lines := []string{"[+]ping ok"}
		failed := false
		if readiness {
			for _, c := range s.cfg.ReadyChecks {
				if err := c.Check(r.Context()); err != nil {
					failed = true
					lines = append(lines, fmt.Sprintf("[-]%s failed: %v", c.Name, err))
					continue
				}
				lines = append(lines, "[+]"+c.Name+" ok")
			}
		}
		if failed {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "%s\n%s check failed\n", strings.Join(lines, "\n"), name)
			return
		}
		if r.URL.Query().Has("verbose") {
			fmt.Fprintf(w, "%s\n%s check passed\n", strings.Join(lines, "\n"), name)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// VersionInfo is what /version serves (k8s.io/apimachinery/pkg/version.Info
// shape).
type VersionInfo struct {
	Major        string `json:"major"`
	Minor        string `json:"minor"`
	GitVersion   string `json:"gitVersion"`
	GitCommit    string `json:"gitCommit"`
	GitTreeState string `json:"gitTreeState"`
	BuildDate    string `json:"buildDate"`
	GoVersion    string `json:"goVersion"`
	Compiler     string `json:"compiler"`
	Platform     string `json:"platform"`
}

func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.Version)
}

type statusRecorder struct {
	http.ResponseWriter
	code    int
	written bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.written {
		r.code, r.written = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
