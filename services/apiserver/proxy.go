package apiserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// pods/log, pods/exec, pods/attach and pods/portforward are served by the
// kubelet of the pod's node, as in Kubernetes: the apiserver authenticates
// and authorizes the request, finds the node's kubelet endpoint in
// Node.status (the InternalIP address and
// daemonEndpoints.kubeletEndpoint.Port) and proxies the request to the
// kubelet's HTTPS server, /containerLogs/{ns}/{pod}/{container},
// /exec/{ns}/{pod}/{container}, /attach/{ns}/{pod}/{container} and
// /portForward/{ns}/{pod}, keeping the query (a port forward's ports=
// becomes port=, as kube-apiserver passes it). An exec, an attach or a
// port forward upgrades the connection (SPDY or WebSocket); the proxy
// passes the upgrade through. The kubelet authenticates the apiserver by its kubelet
// client certificate (Config.KubeletClientTLS) and answers 401 or 403
// itself, which the proxy passes through too.

// defaultKubeletPort is the kubelet's port when the node does not say.
const defaultKubeletPort = 10250

// kubeletTransport reaches kubelets: as the apiserver's kubelet client
// (Config.KubeletClientTLS), not verifying the kubelet's serving
// certificate when no CA for it is configured (kube-apiserver without
// --kubelet-certificate-authority does the same).
func (s *Server) kubeletTransport() *http.Transport {
	tc := s.cfg.KubeletClientTLS
	if tc == nil {
		tc = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // see above
	}
	return &http.Transport{TLSClientConfig: tc.Clone(), ForceAttemptHTTP2: false, Proxy: nil,
		DialContext: (&net.Dialer{}).DialContext}
}

// proxyToKubelet serves pods/log (get), and pods/exec, pods/attach and
// pods/portforward (get or create).
func (s *Server) proxyToKubelet(q *request) {
	sub := q.info.Subresource
	if (sub == "log" && q.info.Verb != "get") || (sub != "log" && q.info.Verb != "get" && q.info.Verb != "create") {
		writeStatus(q.w, errMethodNotSupported(q.res.GroupResource(), q.info.Verb))
		return
	}
	pod, err := s.getPod(q)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	qv := q.r.URL.Query()
	var path string
	switch sub {
	case "portforward":
		if path, err = portForwardPath(pod, qv); err != nil {
			writeStatus(q.w, err)
			return
		}
	default:
		container, err := pickContainer(pod, qv.Get("container"))
		if err != nil {
			writeStatus(q.w, err)
			return
		}
		qv.Del("container")
		path = map[string]string{"log": "/containerLogs/", "exec": "/exec/", "attach": "/attach/"}[sub] + pod.Namespace + "/" + pod.Name + "/" + container
	}
	if pod.Spec.NodeName == "" {
		writeStatus(q.w, errBadRequest("pod %s does not have a host assigned", pod.Name))
		return
	}
	host, err := s.kubeletHost(q, pod.Spec.NodeName)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	target := &url.URL{Scheme: "https", Host: host, Path: path, RawQuery: qv.Encode()}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL = target
			r.Out.Host = host
			// The user's credentials are not the kubelet's business.
			r.Out.Header.Del("Authorization")
		},
		Transport:     s.kubeletTransport(),
		FlushInterval: -1, // logs -f stream
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error dialing the kubelet of node %s: %v", pod.Spec.NodeName, err)))
		},
	}
	rp.ServeHTTP(q.w, q.r)
}

// portForwardPath is the kubelet's path for a port forward into pod, and
// turns the query's ports= (PodPortForwardOptions) into the kubelet's
// port=, checking each.
func portForwardPath(pod *corev1.Pod, qv url.Values) (string, error) {
	for _, v := range qv["ports"] {
		if p, err := strconv.ParseUint(v, 10, 16); err != nil || p == 0 {
			return "", errBadRequest("invalid port %q: must be between 1 and 65535", v)
		}
		qv.Add("port", v)
	}
	qv.Del("ports")
	return "/portForward/" + pod.Namespace + "/" + pod.Name, nil
}

func (s *Server) getPod(q *request) (*corev1.Pod, error) {
	kv, err := s.store.Get(q.ctx(), q.key())
	if errors.Is(err, storage.ErrNotFound) {
		return nil, apierrors.NewNotFound(q.res.GroupResource(), q.info.Name)
	}
	if err != nil {
		return nil, err
	}
	obj, err := decodeStored(q.res, kv)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Pod), nil
}

// pickContainer is the container the request names, or the pod's only
// one (or the one kubectl.kubernetes.io/default-container names), with
// Kubernetes' messages otherwise.
func pickContainer(pod *corev1.Pod, name string) (string, error) {
	if name == "" {
		if d := pod.Annotations["kubectl.kubernetes.io/default-container"]; d != "" {
			name = d
		} else if len(pod.Spec.Containers) == 1 {
			return pod.Spec.Containers[0].Name, nil
		} else {
			names := ""
			for i, c := range pod.Spec.Containers {
				if i > 0 {
					names += " "
				}
				names += c.Name
			}
			return "", errBadRequest("a container name must be specified for pod %s, choose one of: [%s]", pod.Name, names)
		}
	}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			if c.Name == name {
				return name, nil
			}
		}
	}
	return "", errBadRequest("container %s is not valid for pod %s", name, pod.Name)
}

// kubeletHost is host:port of a node's kubelet.
func (s *Server) kubeletHost(q *request, node string) (string, error) {
	kv, err := s.store.Get(q.ctx(), storage.Key("", "nodes", "", node))
	if errors.Is(err, storage.ErrNotFound) {
		return "", apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, node)
	}
	if err != nil {
		return "", err
	}
	obj, err := decodeStored(s.coreResource("nodes"), kv)
	if err != nil {
		return "", err
	}
	n := obj.(*corev1.Node)
	addr := ""
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range n.Status.Addresses {
			if a.Type == t && addr == "" {
				addr = a.Address
			}
		}
	}
	if addr == "" {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %s has no address for its kubelet", node))
	}
	port := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port == 0 {
		port = defaultKubeletPort
	}
	return net.JoinHostPort(addr, strconv.Itoa(port)), nil
}
