package envvars

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EnvVar is one environment variable.
type EnvVar struct {
	Name, Value string
}

// masterServices are the Services of the default namespace whose variables
// every pod gets, whatever its namespace and enableServiceLinks.
var masterServices = map[string]bool{"kubernetes": true}

// isServiceIPSet reports whether s has a cluster IP (not headless, not
// ExternalName).
func isServiceIPSet(s *corev1.Service) bool {
	return s.Spec.ClusterIP != corev1.ClusterIPNone && s.Spec.ClusterIP != ""
}

// ForPod returns the Service variables of a pod in namespace ns, as a map
// from name to value. master are the Services of the default namespace
// (only "kubernetes" is used), local those of ns; enableServiceLinks nil is
// true (the API's default). A Service of ns named like a master Service
// wins over it, as in the kubelet.
func ForPod(ns string, enableServiceLinks *bool, master, local []*corev1.Service) map[string]string {
	links := enableServiceLinks == nil || *enableServiceLinks
	chosen := map[string]*corev1.Service{}
	for _, s := range master {
		if s.Namespace == metav1.NamespaceDefault && masterServices[s.Name] && isServiceIPSet(s) {
			chosen[s.Name] = s
		}
	}
	if links {
		for _, s := range local {
			if s.Namespace == ns && isServiceIPSet(s) {
				chosen[s.Name] = s
			}
		}
	}
	names := make([]string, 0, len(chosen))
	for n := range chosen {
		names = append(names, n)
	}
	sort.Strings(names)
	svcs := make([]*corev1.Service, 0, len(names))
	for _, n := range names {
		svcs = append(svcs, chosen[n])
	}
	m := map[string]string{}
	for _, e := range FromServices(svcs) {
		m[e.Name] = e.Value
	}
	return m
}

// FromServices returns the variables of services, in order; a Service
// without a cluster IP (headless, ExternalName) or without ports adds none.
func FromServices(services []*corev1.Service) []EnvVar {
	var out []EnvVar
	for _, s := range services {
		if !isServiceIPSet(s) || len(s.Spec.Ports) == 0 {
			continue
		}
		prefix := envName(s.Name)
		out = append(out, EnvVar{prefix + "_SERVICE_HOST", s.Spec.ClusterIP})
		portName := prefix + "_SERVICE_PORT"
		out = append(out, EnvVar{portName, strconv.Itoa(int(s.Spec.Ports[0].Port))})
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				out = append(out, EnvVar{portName + "_" + envName(p.Name), strconv.Itoa(int(p.Port))})
			}
		}
		out = append(out, linkVariables(s, prefix)...)
	}
	return out
}

// envName is kube's makeEnvVariableName: Service names are DNS-1035
// labels (a letter first, no dots), port names may start with a digit.
func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// linkVariables are docker's link variables; docker special-cases the
// first port as NAME_PORT.
func linkVariables(s *corev1.Service, prefix string) []EnvVar {
	var out []EnvVar
	ip := s.Spec.ClusterIP
	for i, p := range s.Spec.Ports {
		proto := string(corev1.ProtocolTCP)
		if p.Protocol != "" {
			proto = string(p.Protocol)
		}
		lower := strings.ToLower(proto)
		url := fmt.Sprintf("%s://%s:%d", lower, ip, p.Port)
		if i == 0 {
			out = append(out, EnvVar{prefix + "_PORT", url})
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		out = append(out,
			EnvVar{pp, url},
			EnvVar{pp + "_PROTO", lower},
			EnvVar{pp + "_PORT", strconv.Itoa(int(p.Port))},
			EnvVar{pp + "_ADDR", ip})
	}
	return out
}
