package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/kubelet/container"
	"github.com/cairn-dev/cairn/services/kubelet/dns"
	"github.com/cairn-dev/cairn/services/kubelet/envvars"
)

// ErrServicesNotSynced means the Service cache has not been filled yet, so
// a container's Service variables cannot be built; the start is retried.
var ErrServicesNotSynced = errors.New("services have not yet been read at least once, cannot construct envvars")

func newDNSConfigurer(cfg Config) (*dns.Configurer, error) {
	c := &dns.Configurer{ClusterDomain: cfg.ClusterDomain, ResolverConfig: cfg.ResolvConf}
	for _, s := range cfg.ClusterDNS {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("kubelet: cluster DNS %q is not an IP address: %w", s, ErrConfig)
		}
		c.ClusterDNS = append(c.ClusterDNS, ip)
	}
	return c, nil
}

// podDNS is the sandbox's resolver configuration for pod (see package
// dns); nil on a simulated runtime.
func (k *Kubelet) podDNS(pod *corev1.Pod) (*container.DNSConfig, error) {
	if k.info.Simulated {
		return nil, nil
	}
	d, err := k.dns.PodDNS(pod)
	if err != nil {
		return nil, fmt.Errorf("pod DNS: %w", err)
	}
	return &container.DNSConfig{Servers: d.Servers, Searches: d.Searches, Options: d.Options}, nil
}

// dnsWarning records a DNS configuration that was cut or fell back as an
// Event of pod, as the kubelet's dns Configurer does.
func (k *Kubelet) dnsWarning(pod *corev1.Pod, reason, msg string) {
	k.podEventf(context.Background(), pod, corev1.EventTypeWarning, reason, "%s", msg)
}

// serviceEnv is the Service variables of pod's containers (package
// envvars), read from the kubelet's Service cache: the master Service
// default/kubernetes and, with enableServiceLinks, the Services of the
// pod's namespace.
func (k *Kubelet) serviceEnv(pod *corev1.Pod) (map[string]string, error) {
	if !k.services.HasSynced() {
		return nil, ErrServicesNotSynced
	}
	var master []*corev1.Service
	if s, ok := k.services.Get(metav1.NamespaceDefault, "kubernetes"); ok {
		master = []*corev1.Service{s}
	}
	var local []*corev1.Service
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		local = k.services.ByIndex(consumer.IndexNamespace, pod.Namespace)
	}
	return envvars.ForPod(pod.Namespace, pod.Spec.EnableServiceLinks, master, local), nil
}

// hostnameAndDomain are the pod's hostname (spec.hostname, else its name,
// cut to 63 characters) and, with spec.subdomain, its domain
// <subdomain>.<ns>.svc.<cluster domain>, as kube's
// GeneratePodHostNameAndDomain.
func (k *Kubelet) hostnameAndDomain(pod *corev1.Pod) (string, string) {
	host := pod.Name
	if pod.Spec.Hostname != "" {
		host = pod.Spec.Hostname
	}
	if len(host) > 63 {
		host = strings.TrimRight(host[:63], "-.")
	}
	domain := ""
	if pod.Spec.Subdomain != "" && k.cfg.ClusterDomain != "" {
		domain = pod.Spec.Subdomain + "." + pod.Namespace + ".svc." + k.cfg.ClusterDomain
	}
	return host, domain
}

// managedHosts is the kubelet's managed /etc/hosts of a pod: localhost
// entries, the pod's addresses under its hostname (and FQDN with a
// subdomain), then its hostAliases, as kube's managedHostsFileContent.
func managedHosts(ips []string, host, domain string, aliases []corev1.HostAlias) string {
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file.\n")
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range ips {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, host, domain, host)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, host)
		}
	}
	if len(aliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range aliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.String()
}

// hostsMount writes the pod's managed hosts file (RootDir/pods/<uid>/etc-hosts)
// and returns its mount at /etc/hosts, unless the container mounts
// something there itself or the sandbox has no address yet (as kube).
func (k *Kubelet) hostsMount(pod *corev1.Pod, c *corev1.Container, sb *container.Sandbox) (*container.Mount, error) {
	if sb == nil || len(sb.IPs) == 0 {
		return nil, nil
	}
	for _, m := range c.VolumeMounts {
		if filepath.Clean(m.MountPath) == "/etc/hosts" {
			return nil, nil
		}
	}
	host, domain := k.hostnameAndDomain(pod)
	dir := k.podDir(string(pod.UID))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	path := filepath.Join(dir, "etc-hosts")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(managedHosts(sb.IPs, host, domain, pod.Spec.HostAliases)), 0o644); err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	return &container.Mount{HostPath: path, ContainerPath: "/etc/hosts"}, nil
}
