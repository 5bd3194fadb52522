// Package bootstraptoken is the apiserver's authenticator of bootstrap
// tokens, a port of kube's plugin/pkg/auth/authenticator/token/bootstrap:
// a bearer token <id>.<secret> whose Secret kube-system/bootstrap-token-<id>
// (type bootstrap.kubernetes.io/token, see services/pki/jointoken) holds
// the same secret, allows authentication and has not expired,
// authenticates as user system:bootstrap:<id> in the groups
// system:bootstrappers and the Secret's auth-extra-groups. Nodes that join
// a cluster create their CertificateSigningRequest with it.
//
// The Secret is read from etcd on every request that carries such a
// token: bootstrap tokens are used a few times per joining node, not on
// the hot path, so no cache is kept.
package bootstraptoken
