// Package clitest is the binary-level test of cairn's command-line
// conventions: it has no code of its own, only tests.
//
// TestCLI builds the cairn binary, runs `cairn up --node=false` on a data
// directory in a temporary directory, and runs the commands users run
// (timeline, audit, get --at, diff, events tail --no-follow, events verify)
// from another working directory, finding the cluster as kubectl would:
// through KUBECONFIG (also a colon-separated list that client-go merges),
// --kubeconfig, or --data-dir. Wrong or missing kubeconfigs, and a
// kubeconfig away from any data directory for the commands that need etcd
// and NATS, give a one-line error. Then it adds a node to the running
// cluster as the README says, `cairn kubelet --data-dir D --node-name N
// --runtime hollow`, and checks that the node's credentials are issued
// from D's PKI (CN system:node:N, O system:nodes) and that its Node is
// registered by that user.
//
// The test is skipped with -short:
//
//	go test ./services/cairn/clitest -v
package clitest
