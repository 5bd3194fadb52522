package kubelet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/services/kubelet/container"
)

// prober runs the liveness, readiness and startup probes of running
// containers, one goroutine per container and probe, as the kubelet's
// prober manager. Results are read by the pod workers (ready, started,
// shouldKill); a change of result kicks the pod's worker. On simulated
// runtimes nothing is probed and every container is started and ready.
type prober struct {
	k    *Kubelet
	http *http.Client

	mu   sync.Mutex
	ctx  context.Context
	byID map[string]*probeState
	wg   sync.WaitGroup
}

type probeKind int

const (
	liveness probeKind = iota
	readiness
	startup
)

func (p probeKind) String() string {
	return [...]string{"Liveness", "Readiness", "Startup"}[p]
}

// probeState is what the probes of one container found. Guarded by
// prober.mu.
type probeState struct {
	uid                      types.UID
	cancel                   context.CancelFunc
	hasReadiness, hasStartup bool
	ready, started           bool
	// kill is set when killedBy (liveness or startup) failed past its
	// threshold.
	kill     bool
	killedBy probeKind
}

func newProber(k *Kubelet) *prober {
	tr := &http.Transport{
		DialContext:       k.cfg.Dial,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet's httpGet probes do not verify either
		DisableKeepAlives: true,
	}
	return &prober{k: k, byID: map[string]*probeState{},
		http: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}}
}

// run makes probing possible until ctx ends, then waits for every probe.
func (p *prober) run(ctx context.Context) error {
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	<-ctx.Done()
	p.wg.Wait()
	return nil
}

// started reports whether a running container passed its startup probe
// (true when it has none).
func (p *prober) started(id string, c *corev1.Container) bool {
	if p.k.info.Simulated {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.byID[id]; ok {
		return !st.hasStartup || st.started
	}
	return c.StartupProbe == nil
}

// ready reports whether a running container passes its readiness probe
// (true when it has none).
func (p *prober) ready(id string, c *corev1.Container) bool {
	if p.k.info.Simulated {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.byID[id]; ok {
		return !st.hasReadiness || st.ready
	}
	return c.ReadinessProbe == nil
}

// shouldKill reports whether a liveness or startup probe failed past its
// threshold, and which.
func (p *prober) shouldKill(id string) (bool, probeKind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.byID[id]; ok && st.kill {
		return true, st.killedBy
	}
	return false, 0
}

// sync starts probes for the pod's running containers that have any, and
// stops those of containers that no longer run.
func (p *prober) sync(pod *corev1.Pod, rs *container.PodStatus) {
	if p.k.info.Simulated {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil || p.ctx.Err() != nil {
		return
	}
	running := map[string]bool{}
	podIP := ""
	if sb := rs.Sandbox(); sb != nil && len(sb.IPs) > 0 {
		podIP = sb.IPs[0]
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		l := rs.Latest(c.Name)
		if l == nil || l.State != container.StateRunning {
			continue
		}
		running[l.ID] = true
		if _, ok := p.byID[l.ID]; ok || (c.LivenessProbe == nil && c.ReadinessProbe == nil && c.StartupProbe == nil) {
			continue
		}
		ctx, cancel := context.WithCancel(p.ctx)
		st := &probeState{uid: pod.UID, cancel: cancel, hasReadiness: c.ReadinessProbe != nil, hasStartup: c.StartupProbe != nil}
		p.byID[l.ID] = st
		target := probeTarget{pod: pod, c: c, id: l.ID, podIP: podIP, startedAt: l.StartedAt}
		for kind, pr := range map[probeKind]*corev1.Probe{liveness: c.LivenessProbe, readiness: c.ReadinessProbe, startup: c.StartupProbe} {
			if pr == nil {
				continue
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.loop(ctx, st, kind, pr, target)
			}()
		}
	}
	for id, st := range p.byID {
		if st.uid == pod.UID && !running[id] {
			st.cancel()
			delete(p.byID, id)
		}
	}
}

// forget stops the probes of one container.
func (p *prober) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.byID[id]; ok {
		st.cancel()
		delete(p.byID, id)
	}
}

// forgetPod stops the probes of a pod's containers.
func (p *prober) forgetPod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, st := range p.byID {
		if st.uid == uid {
			st.cancel()
			delete(p.byID, id)
		}
	}
}

type probeTarget struct {
	pod       *corev1.Pod
	c         *corev1.Container
	id, podIP string
	startedAt time.Time
}

func seconds(v, def int32) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

// loop runs one probe every periodSeconds after initialDelaySeconds,
// counting consecutive results against the thresholds.
func (p *prober) loop(ctx context.Context, st *probeState, kind probeKind, pr *corev1.Probe, t probeTarget) {
	period := seconds(pr.PeriodSeconds, 10)
	if !sleepUntil(ctx, t.startedAt.Add(time.Duration(pr.InitialDelaySeconds)*time.Second), p.k.now) {
		return
	}
	successes, failures := 0, 0
	succThreshold, failThreshold := max(int(pr.SuccessThreshold), 1), max(int(pr.FailureThreshold), 1)
	if pr.FailureThreshold == 0 {
		failThreshold = 3
	}
	for {
		p.mu.Lock()
		waitStartup := kind != startup && st.hasStartup && !st.started
		p.mu.Unlock()
		if !waitStartup {
			ok, out := p.probe(ctx, kind, pr, t)
			if ctx.Err() != nil {
				return
			}
			if ok {
				successes, failures = successes+1, 0
			} else {
				successes, failures = 0, failures+1
				// Every failure, as the kubelet's prober: the
				// recorder's correlator folds the repeats.
				p.k.containerEventf(ctx, t.pod, t.c.Name, corev1.EventTypeWarning, ReasonUnhealthy, "%s probe failed: %s", kind, out)
			}
			if done := p.record(st, kind, ok, successes >= succThreshold, failures >= failThreshold); done {
				return
			}
		}
		if !sleepUntil(ctx, p.k.now().Add(period), p.k.now) {
			return
		}
	}
}

// record applies a result; done ends the probe loop (startup succeeded,
// or the container is to be killed). It kicks the pod's worker when the
// result changes what the worker sees.
func (p *prober) record(st *probeState, kind probeKind, ok, succeeded, failed bool) (done bool) {
	p.mu.Lock()
	changed := false
	switch {
	case kind == readiness && ok && succeeded && !st.ready:
		st.ready, changed = true, true
	case kind == readiness && !ok && failed && st.ready:
		st.ready, changed = false, true
	case kind == startup && ok && succeeded:
		st.started, changed, done = true, true, true
	case kind != readiness && !ok && failed:
		st.kill, st.killedBy, changed, done = true, kind, true, true
	}
	uid := st.uid
	p.mu.Unlock()
	if changed {
		p.k.workers.kickUID(uid)
	}
	return done
}

func sleepUntil(ctx context.Context, t time.Time, now func() time.Time) bool {
	d := t.Sub(now())
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// probe runs one probe: exec through the runtime, httpGet and tcpSocket
// through Config.Dial (which reaches pod IPs).
func (p *prober) probe(ctx context.Context, kind probeKind, pr *corev1.Probe, t probeTarget) (bool, string) {
	timeout := seconds(pr.TimeoutSeconds, 1)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case pr.Exec != nil:
		res, err := p.k.rt.ExecSync(ctx, t.id, pr.Exec.Command, timeout)
		if err != nil {
			return false, err.Error()
		}
		if res.ExitCode != 0 {
			return false, fmt.Sprintf("command %q exited with %d: %s", pr.Exec.Command, res.ExitCode, strings.TrimSpace(string(res.Stdout)+string(res.Stderr)))
		}
		return true, ""
	case pr.HTTPGet != nil:
		return p.httpProbe(ctx, pr.HTTPGet, t)
	case pr.TCPSocket != nil:
		port, err := resolvePort(pr.TCPSocket.Port, t.c)
		if err != nil {
			return false, err.Error()
		}
		host := pr.TCPSocket.Host
		if host == "" {
			host = t.podIP
		}
		conn, err := p.k.cfg.Dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false, fmt.Sprintf("dial tcp %s:%d: %v", host, port, err)
		}
		conn.Close()
		return true, ""
	}
	p.k.log.Warn("unsupported probe type: treated as success", "kind", kind.String(), "container", t.c.Name)
	return true, ""
}

func (p *prober) httpProbe(ctx context.Context, g *corev1.HTTPGetAction, t probeTarget) (bool, string) {
	port, err := resolvePort(g.Port, t.c)
	if err != nil {
		return false, err.Error()
	}
	host := g.Host
	if host == "" {
		host = t.podIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	u = u.JoinPath(path)
	if i := strings.IndexByte(g.Path, '?'); i >= 0 {
		u, _ = url.Parse(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return true, ""
	}
	return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
}

// resolvePort turns a probe port (a number or the name of a container
// port) into a number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port %q in container %s", p.StrVal, c.Name)
}
