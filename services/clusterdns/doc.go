// Package clusterdns is cairn's cluster DNS: CoreDNS
// (github.com/coredns/coredns) linked into the cairn binary with only the
// plugins a kubeadm Corefile uses (see [Plugins]), its real kubernetes
// plugin reading Services, EndpointSlices, Namespaces and Pods through the
// apiserver with client-go. `cairn coredns -conf FILE` runs it ([Run]);
// `cairn up` deploys it as kubeadm does (see [Objects]): the Deployment
// coredns in kube-system running the image cairn.local/coredns (the cairn
// binary itself, see ops/images), the ConfigMap coredns with the Corefile
// ([Corefile]), and the Service kube-dns at 10.96.0.10.
//
// # Names
//
// As CoreDNS answers on any cluster: <svc>.<ns>.svc.<domain> is the
// ClusterIP (A), or for a headless Service every ready endpoint's address;
// <hostname>.<svc>.<ns>.svc.<domain> is a pod with spec.hostname and
// spec.subdomain (StatefulSet pods); _<port>._<proto>.<svc>.<ns>.svc.<domain>
// is an SRV per named port; <a-b-c-d>.<ns>.pod.<domain> answers a-b-c-d
// (pods insecure); unknown names are NXDOMAIN.
//
// # Credentials
//
// kubeadm's CoreDNS reads the API with its ServiceAccount's token
// (client-go's in-cluster config). cairn has no ServiceAccount tokens yet,
// so `cairn up` issues CoreDNS a client certificate for user
// system:coredns (bound to the ClusterRole system:coredns with the
// ServiceAccount kube-system/coredns), puts it in a kubeconfig that
// reaches the apiserver through the kubernetes Service
// (https://10.96.0.1:443, verified as kubernetes.default.svc), stores that
// in the Secret kube-system/coredns-kubeconfig, mounts it at
// /etc/coredns-kubeconfig and names it in the Corefile (kubeconfig
// /etc/coredns-kubeconfig/kubeconfig). The address is a Service address:
// CoreDNS in a pod syncs only once the node's proxy routes it. Once tokens
// exist, Options.Kubeconfig nil leaves the Corefile to the in-cluster
// config; a ConfigMap already written keeps its kubeconfig line (Ensure
// never rewrites a Corefile).
//
// # Image
//
// The image cairn.local/coredns is the cairn binary itself with the ELF
// interpreter and libraries it names (ops/images), entrypoint
// `/cairn coredns`: a copied cairn binary deploys its own DNS with no
// toolchain and no registry, and `cairn up` imports it into its node.
//
// # Upstream
//
// kubeadm's Corefile forwards every other name to the node's resolver
// (forward . /etc/resolv.conf). cairn's default Corefile forwards nothing,
// so no query leaves the cluster; CorefileOptions.Forward (cairn up
// --cluster-dns-forward) adds forward and loop.
package clusterdns
