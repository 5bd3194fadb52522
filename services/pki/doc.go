// Package pki keeps the certificate authority of a cairn cluster and the
// certificates issued from it.
//
// Load creates the files on first start and reads them on later starts, so
// a cluster keeps its identity across restarts of the same data directory:
//
//	ca.crt, ca.key                 ECDSA P-256 CA, valid 10 years
//	apiserver.crt, apiserver.key   serving certificate of the apiserver
//	admin.crt, admin.key           client certificate CN=cairn-admin, O=system:masters
//	apiserver-kubelet-client.crt, apiserver-kubelet-client.key
//	                               the apiserver's client certificate for
//	                               kubelets (logs, exec), as kubeadm's:
//	                               CN=kube-apiserver-kubelet-client,
//	                               O=system:masters (KubeletClientTLSConfig)
//
// Keys are written with mode 0600, certificates with 0644, the directory with
// 0700. Each file is written to a temporary name and renamed, so a crash
// never leaves a half-written file behind.
//
// The CA is never replaced once ca.crt exists: a missing ca.key next to an
// existing ca.crt is an error (ErrMissingKey), not a reason to mint a new CA
// that would invalidate every certificate issued so far. Leaf certificates
// are re-issued on Load when they are missing, not signed by the CA, close to
// expiry, or (for the serving certificate) lack one of the requested hosts,
// or (for the kubelet client certificate) carry another user or groups.
//
// Client certificates carry the Kubernetes identity the apiserver
// authenticates: the common name is the user, the organizations are the
// groups (as in kubeadm: CN=system:node:<name>, O=system:nodes).
package pki
