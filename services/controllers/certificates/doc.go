// Package certificates holds the CertificateSigningRequest controllers of
// kube's pkg/controller/certificates, on the log:
//
//   - the approver (csrapproving, kube's approver/sarapprove.go) approves
//     kubernetes.io/kube-apiserver-client-kubelet requests for a node's
//     client certificate (subject CN=system:node:<name>, O=system:nodes,
//     no names, client usages) when their requestor may create the
//     certificatesigningrequests/nodeclient subresource (a bootstrapper,
//     for a new node) or, for a renewal asked by the node itself
//     (requestor = the subject's CN), certificatesigningrequests/selfnodeclient,
//     each checked with a SubjectAccessReview as kube does. cairn adds
//     one recognizer as k3s agents get the proxy's credentials from their
//     token: a kubernetes.io/kube-apiserver-client request for exactly
//     CN=system:kube-proxy (no groups, no names, client usages) whose
//     requestor may create certificatesigningrequests/kubeproxyclient.
//     Anything else stays Pending for a human (kubectl certificate approve).
//   - the signer (csrsigning, kube's signer/signer.go) signs approved
//     requests of kubernetes.io/kube-apiserver-client-kubelet,
//     kubernetes.io/kube-apiserver-client and kubernetes.io/kubelet-serving
//     with the cluster CA, for spec.expirationSeconds (at least 10 minutes)
//     or the cluster signing duration, whichever is shorter; a request
//     its signer's rules refuse gets the Failed condition.
package certificates
