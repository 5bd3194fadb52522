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
// # Upstream
//
// kubeadm's Corefile forwards every other name to the node's resolver
// (forward . /etc/resolv.conf). cairn's default Corefile forwards nothing,
// so no query leaves the cluster; CorefileOptions.Forward (cairn up
// --cluster-dns-forward) adds forward and loop.
package clusterdns
