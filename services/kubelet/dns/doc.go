// Package dns forms a pod's resolver configuration as the kubelet's
// pkg/kubelet/network/dns does: the DNS servers, search domains and
// options that the CRI runtime writes into the sandbox's /etc/resolv.conf
// (PodSandboxConfig.DnsConfig).
//
// By dnsPolicy:
//
//   - ClusterFirst (the default): the cluster DNS Service's addresses are
//     the only nameservers, the search list is <ns>.svc.<domain>
//     svc.<domain> <domain> followed by the node's own search domains, and
//     options ndots:5. A hostNetwork pod falls back to Default, as in kube.
//   - ClusterFirstWithHostNet: ClusterFirst, also for hostNetwork pods.
//   - Default: the node's resolver (the kubelet's --resolv-conf file);
//     with no file, 127.0.0.1 and search ".".
//   - None: nothing but the pod's dnsConfig.
//
// A pod's dnsConfig is then merged in (nameservers and searches appended
// without duplicates, options overriding by name), and the result is cut
// to kube's limits: 3 nameservers, 32 search domains and 2048 characters
// of search line (the ExpandedDNSConfig limits, on by default since 1.28),
// domains over 253 characters dropped. A cut is reported through
// Configurer.Warn (the kubelet records it as a DNSConfigForming Event).
//
// ClusterFirst without a cluster DNS address falls back to Default and
// warns MissingClusterDNS, as the kubelet does.
package dns
