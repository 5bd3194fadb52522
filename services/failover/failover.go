package failover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Endpoints is the list of apiserver addresses (host:port) a client uses,
// and which of them is current. It is safe for concurrent use.
type Endpoints struct {
	mu    sync.Mutex
	hosts []string
	cur   int
	// seeds are the addresses New was given (the server joined, those
	// last known): kept at the end of every list Set makes, as k3s keeps
	// its --server address as the default server of its load balancer,
	// so that a list refreshed with addresses this client cannot reach
	// (another server's --advertise-address) never strands it.
	seeds []string
	// OnChange, if set, is called (outside the lock) with the new list
	// when Set changes it, e.g. to persist it for the next start.
	OnChange func(hosts []string)
	log      *slog.Logger
}

// New returns Endpoints over hosts (host:port or https URLs); the first is
// current.
func New(hosts []string, log *slog.Logger) (*Endpoints, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Endpoints{log: log}
	clean, err := normalize(hosts)
	if err != nil {
		return nil, err
	}
	if len(clean) == 0 {
		return nil, errors.New("failover: no apiserver address")
	}
	e.hosts, e.seeds = clean, clean
	return e, nil
}

func normalize(hosts []string) ([]string, error) {
	var out []string
	for _, h := range hosts {
		if u, err := url.Parse(h); err == nil && u.Host != "" {
			h = u.Host
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			return nil, fmt.Errorf("failover: apiserver address %q: %w", h, err)
		}
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out, nil
}

// Hosts returns a copy of the list.
func (e *Endpoints) Hosts() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.hosts)
}

// Current is the address requests go to now.
func (e *Endpoints) Current() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hosts[e.cur]
}

// Set replaces the list (the seeds stay at its end); the current address
// stays current if it is still listed. An empty list is ignored.
func (e *Endpoints) Set(hosts []string) {
	clean, err := normalize(hosts)
	if err != nil || len(clean) == 0 {
		return
	}
	e.mu.Lock()
	for _, s := range e.seeds {
		if !slices.Contains(clean, s) {
			clean = append(clean, s)
		}
	}
	cur := e.hosts[e.cur]
	changed := !slices.Equal(clean, e.hosts)
	e.hosts, e.cur = clean, max(0, slices.Index(clean, cur))
	onChange := e.OnChange
	e.mu.Unlock()
	if changed {
		e.log.Info("apiserver addresses", "hosts", clean)
		if onChange != nil {
			onChange(slices.Clone(clean))
		}
	}
}

// failed moves past host if it is still current, and returns the address
// to use now.
func (e *Endpoints) failed(host string, err error) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hosts[e.cur] == host && len(e.hosts) > 1 {
		e.cur = (e.cur + 1) % len(e.hosts)
		e.log.Warn("apiserver unreachable, failing over", "from", host, "to", e.hosts[e.cur], "err", err)
	}
	return e.hosts[e.cur]
}

// Wrap returns a copy of rc whose requests go to the current address.
func (e *Endpoints) Wrap(rc *rest.Config) *rest.Config {
	out := rest.CopyConfig(rc)
	out.Host = "https://" + e.Current()
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return &transport{e: e, next: rt}
	}
	return out
}

type transport struct {
	e    *Endpoints
	next http.RoundTripper
}

// RoundTrip sends req to the current address, and on to the next ones
// while the dial fails.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := t.e.Current()
	for range len(t.e.Hosts()) {
		r := req.Clone(req.Context())
		r.URL.Host, r.Host = host, ""
		if req.Body != nil && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		resp, err := t.next.RoundTrip(r)
		if err == nil || req.Context().Err() != nil {
			return resp, err
		}
		next := t.e.failed(host, err)
		if !isDialError(err) || next == host || (req.Body != nil && req.GetBody == nil) {
			return nil, err
		}
		host = next
	}
	return nil, fmt.Errorf("failover: no apiserver reachable (%v)", t.e.Hosts())
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Refresh reads the addresses of the apiservers from the EndpointSlices
// of the default/kubernetes Service (each apiserver one endpoint, written
// by the apiservers' lease reconciler) and sets them.
func (e *Endpoints) Refresh(ctx context.Context, client kubernetes.Interface) error {
	list, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return fmt.Errorf("failover: refresh: %w", err)
	}
	var hosts []string
	for _, sl := range list.Items {
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				for _, p := range sl.Ports {
					if p.Port != nil {
						hosts = append(hosts, net.JoinHostPort(a, strconv.Itoa(int(*p.Port))))
					}
				}
			}
		}
	}
	if len(hosts) > 0 {
		// Set keeps the current address current while it is listed.
		e.Set(hosts)
	}
	return nil
}

// Run refreshes the list every interval (0 means 30s) until ctx ends,
// with client built on a config from Wrap.
func (e *Endpoints) Run(ctx context.Context, client kubernetes.Interface, interval time.Duration) error {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := e.Refresh(ctx, client); err != nil && ctx.Err() == nil {
			e.log.Debug("refreshing apiserver addresses", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
