// Package kubeconfig writes the kubeconfig files kubectl, client-go and
// cairn's own components use to reach the apiserver.
//
// A written file has one cluster, one user and one context, all reachable
// through the context named "cairn", which is the current context. The
// certificates are embedded in the file, so it stays valid when the data
// directory moves.
package kubeconfig
