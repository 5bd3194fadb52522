// Package serviceaccount holds kube-controller-manager's service-account
// controllers, on the consumer runtime:
//
//   - serviceaccount (kube's serviceaccounts-controller): every active
//     namespace has a ServiceAccount named default; one that is deleted is
//     made again.
//   - root-ca-cert-publisher: every active namespace has the ConfigMap
//     kube-root-ca.crt whose ca.crt is the cluster's CA bundle (what a pod
//     verifies the apiserver with), put back when deleted or changed.
//   - tokens (kube's tokens-controller, legacy tokens only when asked
//     for): a Secret of type kubernetes.io/service-account-token that
//     names an existing ServiceAccount gets a non-expiring token signed
//     with the cluster's service-account key, with ca.crt and namespace;
//     one naming a ServiceAccount that is gone (or has another UID) is
//     deleted, and so are the token Secrets of a deleted ServiceAccount.
//     No token Secret is ever made unasked: pods get bound tokens through
//     the TokenRequest API.
//
// The first two reconcile one key per namespace, the tokens controller one
// per Secret.
package serviceaccount
