package webhook

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/netns"
)

// newClientManager is kube's webhook ClientManager (REST clients cached by
// client config, caBundle trusted, the serving name of a service
// reference checked as <service>.<namespace>.svc) with cairn's resolvers:
// a url is dialed as it is, from the apiserver's own network namespace;
// a service reference is resolved to a ready endpoint's pod address and
// dialed from inside the network namespace of that endpoint's node
// (resolver.dial), never through the apiserver's default route. No HTTP
// proxy is ever used.
func newClientManager(r *resolver) (*webhookutil.ClientManager, error) {
	cm, err := webhookutil.NewClientManager([]schema.GroupVersion{admissionv1.SchemeGroupVersion, admissionv1beta1.SchemeGroupVersion},
		admissionv1.AddToScheme, admissionv1beta1.AddToScheme)
	if err != nil {
		return nil, fmt.Errorf("webhook: client manager: %w", err)
	}
	cm.SetAuthenticationInfoResolver(authInfo{r})
	cm.SetServiceResolver(r)
	if err := cm.Validate(); err != nil {
		return nil, fmt.Errorf("webhook: client manager: %w", err)
	}
	return &cm, nil
}

// ServiceResolver and AuthenticationInfoResolverWrapper give another
// client of webhooks (kube's CRD conversion webhook converter, which
// builds its own ClientManager from these two, as kube-apiserver hands
// them to apiextensions-apiserver) the resolvers the admission webhooks
// use: a service reference is resolved from this Dispatcher's Service and
// EndpointSlice caches and dialed inside its endpoint's node namespace;
// a url is dialed as it is; no proxy, no client credentials. They work
// once Run has filled the caches.
func (d *Dispatcher) ServiceResolver() webhookutil.ServiceResolver { return d.resolver }

// AuthenticationInfoResolverWrapper: see ServiceResolver. It replaces the
// resolver it wraps (kube's default, which reads no kubeconfig here).
func (d *Dispatcher) AuthenticationInfoResolverWrapper() webhookutil.AuthenticationInfoResolverWrapper {
	return func(webhookutil.AuthenticationInfoResolver) webhookutil.AuthenticationInfoResolver {
		return authInfo{d.resolver}
	}
}

func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// authInfo is the AuthenticationInfoResolver: no client credentials
// (kube-apiserver's default without --admission-control-config-file
// kubeconfigs), the netns dialer for services.
type authInfo struct{ r *resolver }

var _ webhookutil.AuthenticationInfoResolver = authInfo{}

func (a authInfo) ClientConfigFor(string) (*rest.Config, error) {
	return &rest.Config{Proxy: noProxy}, nil
}

func (a authInfo) ClientConfigForService(string, string, int) (*rest.Config, error) {
	return &rest.Config{Proxy: noProxy, Dial: a.r.dial}, nil
}

// resolver resolves service references from the Service and EndpointSlice
// caches, as kube-apiserver's endpoint (aggregator) routing does
// (k8s.io/apiserver/pkg/util/proxy ResolveEndpoint), and remembers which
// node each address it handed out lives on, for dial.
type resolver struct {
	d *Dispatcher

	mu    sync.Mutex
	nodes map[string]string // pod IP -> node name
}

var _ webhookutil.ServiceResolver = (*resolver)(nil)

// ResolveEndpoint picks a ready endpoint of the Service's port at random.
func (r *resolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	svc, ok := r.d.services.get(objKey(namespace, name))
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, name)
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort, "":
	default:
		return nil, fmt.Errorf("unsupported service type %q", svc.Spec.Type)
	}
	var svcPort *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			svcPort = &svc.Spec.Ports[i]
			break
		}
	}
	if svcPort == nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", port, svc.Name))
	}
	var slices []*discoveryv1.EndpointSlice
	r.d.slices.each(namespace+"/", func(s *discoveryv1.EndpointSlice) {
		if s.Labels[discoveryv1.LabelServiceName] == name {
			slices = append(slices, s)
		}
	})
	ip, p, node, ok := randomEndpoint(slices, svcPort.Name)
	if !ok {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", svc.Name))
	}
	r.mu.Lock()
	r.nodes[ip] = node
	r.mu.Unlock()
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(ip, strconv.Itoa(int(p)))}, nil
}

// randomEndpoint is kube's RandomEndpoint: a ready endpoint (ready unset
// counts as ready) of a slice port named as the Service port, at random.
func randomEndpoint(slices []*discoveryv1.EndpointSlice, portName string) (ip string, port int32, node string, ok bool) {
	type cand struct {
		ip, node string
		port     int32
	}
	var cands []cand
	for _, s := range slices {
		for _, sp := range s.Ports {
			if sp.Port == nil || (sp.Name == nil && portName != "") || (sp.Name != nil && *sp.Name != portName) {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
					continue
				}
				n := ""
				if ep.NodeName != nil {
					n = *ep.NodeName
				}
				cands = append(cands, cand{ep.Addresses[0], n, *sp.Port})
			}
		}
	}
	if len(cands) == 0 {
		return "", 0, "", false
	}
	c := cands[rand.IntN(len(cands))]
	return c.ip, c.port, c.node, true
}

// dial connects to a pod address from inside the network namespace of
// the pod's node (Config.NodeNetNS). An address it did not resolve, or a
// node whose namespace is unknown, is refused: it is never dialed from the
// apiserver's own namespace.
func (r *resolver) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	node, ok := r.nodes[host]
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("webhook: %s is not an endpoint address this apiserver resolved", addr)
	}
	if r.d.cfg.NodeNetNS == nil {
		return nil, fmt.Errorf("webhook: no network namespace is known for node %q (the apiserver reaches service webhooks only through a node's network namespace)", node)
	}
	path, ok := r.d.cfg.NodeNetNS(node)
	if !ok {
		return nil, fmt.Errorf("webhook: no network namespace is known for node %q (the apiserver reaches service webhooks only through a node's network namespace)", node)
	}
	return netns.DialContext(ctx, path, network, addr)
}
