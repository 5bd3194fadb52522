// Package clustertest runs a whole control plane in a test's process: the
// apiserver with its log, the real controllers, a stand-in scheduler and
// kubelet, and a running history projection (StartCluster). It serves the
// tests of the history projections that need real rollouts; it lives here,
// at the top of the layers, so that projections/history/historytest (the
// synthetic logs) imports no controller or control plane.
package clustertest
