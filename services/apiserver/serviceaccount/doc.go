// Package serviceaccount is the apiserver's side of Kubernetes service
// accounts, ported from kube's pkg/serviceaccount and
// plugin/pkg/admission/serviceaccount:
//
//   - Tokens signs the JWTs of the TokenRequest API (serviceaccounts/token,
//     served by package apiserver through its TokenIssuer interface) and
//     of legacy token Secrets, with the cluster's service-account key
//     (pki.ServiceAccountKeys, ES256, kid = the key's pki.KeyID), and
//     serves the OIDC discovery documents of its issuer.
//   - Authenticator verifies them: signature with any verifying key
//     (rotation), issuer, audience, expiry (a minute of leeway), and that
//     the ServiceAccount, and the Pod or Secret a token is bound to, still
//     exist with the UID the token names.
//   - Admission is the ServiceAccount admission plugin: the default
//     ServiceAccount, refusal of a missing one, and the projected token
//     volume kube-api-access-xxxxx.
//   - Caches hold the ServiceAccounts and what is needed of Pods and
//     Secrets, from a snapshot of etcd and then the log, so that
//     authentication and admission read no etcd on the request path.
//
// # Claims
//
// A bound token carries iss, sub (system:serviceaccount:NS:NAME), aud,
// iat, nbf, exp, jti and kubernetes.io {namespace, serviceaccount {name,
// uid}, pod {name, uid} and node {name, uid} or secret {name, uid},
// warnafter}; a legacy token iss kubernetes/serviceaccount, sub and the
// kubernetes.io/serviceaccount/* claims, and no expiry.
package serviceaccount
