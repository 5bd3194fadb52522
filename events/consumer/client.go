package consumer

import (
	"fmt"
	"net"
	"net/http"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// NewClient is the clientset a consumer writes back through: NewClientset,
// or client-go's own clientset when rc brings its own transport.
func NewClient(rc *rest.Config, conns int) (kubernetes.Interface, error) {
	if rc.Transport != nil {
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("consumer: new client: %w", err)
		}
		return cs, nil
	}
	return NewClientset(rc, conns)
}

// NewClientset builds a clientset whose transport keeps conns idle
// connections to the apiserver; pass about as many as requests the
// consumer has in flight. client-go's own keeps 25 with TLS and, for
// a plain-HTTP apiserver (loopback), uses http.DefaultTransport, which keeps
// 2: with many bindings in flight over HTTP/1.1 nearly every request would
// then dial a new connection, and the apiserver accept it, at a cost of
// more CPU than the request itself. Authentication, the causation headers
// (rc.WrapTransport) and TLS come from rc as client-go applies them.
func NewClientset(rc *rest.Config, conns int) (*kubernetes.Clientset, error) {
	hc, err := newHTTPClient(rc, conns)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, fmt.Errorf("consumer: new client: %w", err)
	}
	return cs, nil
}

func newHTTPClient(rc *rest.Config, conns int) (*http.Client, error) {
	tlsConfig, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, fmt.Errorf("consumer: tls config: %w", err)
	}
	proxy := http.ProxyFromEnvironment
	if rc.Proxy != nil {
		proxy = rc.Proxy
	}
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if rc.Dial != nil {
		dial = rc.Dial
	}
	tr := utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               proxy,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DialContext:         dial,
		DisableCompression:  rc.DisableCompression,
	})
	if rc.UserAgent == "" {
		// What client-go sends when it builds the transport itself; the
		// apiserver names a write's field manager after it.
		rc = rest.CopyConfig(rc)
		rc.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rt, err := rest.HTTPWrappersForConfig(rc, tr)
	if err != nil {
		return nil, fmt.Errorf("consumer: transport: %w", err)
	}
	return &http.Client{Transport: rt, Timeout: rc.Timeout}, nil
}
