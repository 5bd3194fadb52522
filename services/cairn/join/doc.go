// Package join gives a node that joins a running `cairn up` its
// credentials. Until join tokens exist, a node started on the machine of
// the data directory gets them from that directory's PKI, whose CA key is
// there: NodeKubeconfig issues the node a client certificate with the
// identity kube gives nodes (CN system:node:<name>, O system:nodes) and
// writes a kubeconfig for it next to the node's other state,
//
//	<data-dir>/nodes/<name>/kubelet.kubeconfig
//
// pointing at the apiserver that <data-dir>/endpoints.json names. An
// existing kubeconfig is used as it is; nothing in the PKI is changed.
package join
