// Package jointest holds the integration test of nodes that join
// (cairn kubelet --join, kubelet TLS bootstrapping) and of their failover
// between apiservers. TestJoinAndFailover runs the real cairn binary as
// two servers on one etcd and one NATS (in the test process): server A is
// `cairn up --node=false` on 127.0.0.2 (with its controller-manager, which
// approves and signs CSRs, and scheduler), server B a `cairn apiserver`
// on 127.0.0.3 with A's PKI. On them it checks, in order:
//
//   - system:anonymous cannot create a CertificateSigningRequest (401)
//     and nothing is written;
//   - a join with a wrong token secret is refused with one line and writes
//     nothing, and so is a token whose CA hash names another CA;
//   - `cairn token create` makes a token with which `cairn agent --join
//     https://B` (a hollow node) gets a client certificate for
//     system:node:<name> and one for system:kube-proxy through two CSRs,
//     approved by csrapproving and signed by csrsigning with the cluster
//     CA, requested by system:bootstrap:<id>; the node becomes Ready;
//   - the node learns both apiservers from the default/kubernetes
//     EndpointSlice (servers.json); B is SIGKILLed, and the node's Lease
//     is still renewed (through A) and the node stays Ready;
//   - the node restarted (while B is still dead) reuses its certificate:
//     no new CSR.
//
// The test is skipped with -short; it takes about a minute plus building
// cairn.
package jointest
