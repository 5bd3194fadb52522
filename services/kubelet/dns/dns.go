package dns

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Limits of a pod's resolver configuration, as kube's API validation
// (MaxDNSNameservers, MaxDNSSearchPathsExpanded,
// MaxDNSSearchListCharsExpanded, DNS1123SubdomainMaxLength).
const (
	MaxNameservers     = 3
	MaxSearchPaths     = 32
	MaxSearchListChars = 2048
	maxDomainLength    = 253
	maxResolvConfBytes = 10 << 20
)

// Warning reasons, as the kubelet's Events.
const (
	ReasonDNSConfigForming  = "DNSConfigForming"
	ReasonMissingClusterDNS = "MissingClusterDNS"
)

// Config is a resolver configuration: what goes into /etc/resolv.conf.
type Config struct {
	Servers  []string
	Searches []string
	Options  []string
}

// ResolvConf renders c as a resolv.conf file (nameserver lines, then search
// and options lines when there are any), as containerd's CRI writes it.
func (c Config) ResolvConf() string {
	var b strings.Builder
	if len(c.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(c.Searches, " "))
	}
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(c.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(c.Options, " "))
	}
	return b.String()
}

// Configurer forms the resolver configuration of pods. Its fields are read
// only; it is safe for concurrent use.
type Configurer struct {
	// ClusterDNS are the cluster DNS Service's addresses (the kubelet's
	// --cluster-dns); empty makes ClusterFirst pods fall back to Default.
	ClusterDNS []net.IP
	// ClusterDomain is the cluster's DNS domain (--cluster-domain, e.g.
	// cluster.local); empty adds no cluster search domains.
	ClusterDomain string
	// ResolverConfig is the node's resolv.conf (--resolv-conf, default
	// /etc/resolv.conf); empty means none: Default pods get 127.0.0.1.
	ResolverConfig string
	// Warn, if set, is told of a configuration that was cut to the limits
	// or fell back (reason, message); the kubelet records an Event.
	Warn func(pod *corev1.Pod, reason, message string)
}

func (c *Configurer) warn(pod *corev1.Pod, reason, format string, args ...any) {
	if c.Warn != nil {
		c.Warn(pod, reason, fmt.Sprintf(format, args...))
	}
}

type podDNSType int

const (
	podDNSCluster podDNSType = iota
	podDNSHost
	podDNSNone
)

func podType(pod *corev1.Pod) podDNSType {
	switch pod.Spec.DNSPolicy {
	case corev1.DNSNone:
		return podDNSNone
	case corev1.DNSClusterFirstWithHostNet:
		return podDNSCluster
	case corev1.DNSDefault:
		return podDNSHost
	case corev1.DNSClusterFirst, "":
		if pod.Spec.HostNetwork {
			return podDNSHost
		}
		return podDNSCluster
	}
	// The apiserver refuses any other policy; kube falls back to
	// ClusterFirst.
	return podDNSCluster
}

// PodDNS returns the resolver configuration of pod. It reads
// ResolverConfig on every call (the node's file may change); an unreadable
// file is an error.
func (c *Configurer) PodDNS(pod *corev1.Pod) (Config, error) {
	cfg, err := c.hostConfig()
	if err != nil {
		return Config{}, err
	}
	switch podType(pod) {
	case podDNSNone:
		cfg = Config{}
	case podDNSCluster:
		if len(c.ClusterDNS) > 0 {
			// The cluster DNS is the only nameserver: it forwards what
			// it cannot answer itself.
			cfg.Servers = nil
			for _, ip := range c.ClusterDNS {
				cfg.Servers = append(cfg.Servers, ip.String())
			}
			cfg.Searches = c.clusterSearches(cfg.Searches, pod)
			cfg.Options = []string{"ndots:5"}
			break
		}
		msg := fmt.Sprintf("kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
			corev1.DNSClusterFirst, corev1.DNSDefault)
		c.warn(pod, ReasonMissingClusterDNS, "pod: %q. %s", pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", msg)
		fallthrough
	case podDNSHost:
		if c.ResolverConfig == "" {
			cfg.Servers = []string{"127.0.0.1"}
			cfg.Searches = []string{"."}
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeOptions(cfg.Options, dc.Options)
	}
	cfg.Servers = c.fitNameservers(cfg.Servers, pod)
	cfg.Searches = c.fitSearches(cfg.Searches, pod)
	return cfg, nil
}

func (c *Configurer) hostConfig() (Config, error) {
	if c.ResolverConfig == "" {
		return Config{}, nil
	}
	f, err := os.Open(c.ResolverConfig)
	if err != nil {
		return Config{}, fmt.Errorf("dns: %w", err)
	}
	defer f.Close()
	cfg, err := ParseResolvConf(f)
	if err != nil {
		return Config{}, fmt.Errorf("dns: %s: %w", c.ResolverConfig, err)
	}
	return cfg, nil
}

func (c *Configurer) clusterSearches(hostSearch []string, pod *corev1.Pod) []string {
	if c.ClusterDomain == "" {
		return hostSearch
	}
	s := []string{pod.Namespace + ".svc." + c.ClusterDomain, "svc." + c.ClusterDomain, c.ClusterDomain}
	return omitDuplicates(append(s, hostSearch...))
}

func (c *Configurer) fitNameservers(servers []string, pod *corev1.Pod) []string {
	if len(servers) <= MaxNameservers {
		return servers
	}
	servers = servers[:MaxNameservers]
	c.warn(pod, ReasonDNSConfigForming, "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: %s",
		strings.Join(servers, " "))
	return servers
}

func (c *Configurer) fitSearches(search []string, pod *corev1.Pod) []string {
	cut := false
	if len(search) > MaxSearchPaths {
		search, cut = search[:MaxSearchPaths], true
	}
	// Some resolvers (glibc 2.28) abort on a search path over 255
	// characters: drop those.
	kept := search[:0:0]
	for _, s := range search {
		if len(s) > maxDomainLength {
			cut = true
			continue
		}
		kept = append(kept, s)
	}
	search = kept
	if n := len(strings.Join(search, " ")); n > MaxSearchListChars {
		drop, dropped := 0, 0
		for i := len(search) - 1; i >= 0; i-- {
			dropped += len(search[i]) + 1
			drop++
			if n-dropped <= MaxSearchListChars {
				break
			}
		}
		search, cut = search[:len(search)-drop], true
	}
	if cut {
		c.warn(pod, ReasonDNSConfigForming, "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: %s",
			strings.Join(search, " "))
	}
	return search
}

// ParseResolvConf reads a resolv.conf: nameserver lines accumulate, the
// last search line and the last options line win; search domains lose a
// trailing dot. A nameserver line without an address is an error (the
// others are still returned).
func ParseResolvConf(r io.Reader) (Config, error) {
	cfg := Config{Servers: []string{}, Searches: []string{}, Options: []string{}}
	var bad error
	sc := bufio.NewScanner(io.LimitReader(r, maxResolvConfBytes))
	sc.Buffer(make([]byte, 0, 4096), maxResolvConfBytes)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) < 2 {
				bad = fmt.Errorf("nameserver list is empty")
				continue
			}
			cfg.Servers = append(cfg.Servers, f[1])
		case "search":
			cfg.Searches = []string{}
			for _, s := range f[1:] {
				cfg.Searches = append(cfg.Searches, strings.TrimSuffix(s, "."))
			}
		case "options":
			cfg.Options = slices.Clone(f[1:])
		}
	}
	if err := sc.Err(); err != nil {
		return cfg, err
	}
	return cfg, bad
}

func omitDuplicates(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			out = append(out, v)
			seen[v] = true
		}
	}
	return out
}

// mergeOptions merges the pod's options into existing ones: an option of
// the same name is overridden. Unlike kube (which goes through a map), the
// order is stable: existing options first, then new ones.
func mergeOptions(existing []string, opts []corev1.PodDNSConfigOption) []string {
	var names []string
	vals := map[string]string{}
	set := func(name, v string) {
		if _, ok := vals[name]; !ok {
			names = append(names, name)
		}
		vals[name] = v
	}
	for _, op := range existing {
		name, v, _ := strings.Cut(op, ":")
		set(name, v)
	}
	for _, op := range opts {
		v := ""
		if op.Value != nil {
			v = *op.Value
		}
		set(op.Name, v)
	}
	out := []string{}
	for _, n := range names {
		if vals[n] != "" {
			out = append(out, n+":"+vals[n])
		} else {
			out = append(out, n)
		}
	}
	return out
}
