// Package e2etest is the end-to-end test of cairn through the README's
// command path: it builds the cairn binary, runs `cairn up` as a child
// process with its real node (a private containerd in a network namespace,
// the kubelet on CRI), and drives it with the real kubectl: apply
// ops/examples/web.yaml, pods Ready with IPs, containers checked directly
// through containerd's CRI socket, pod-to-pod traffic by IP, logs and exec,
// scaling, crash-loop back-off, and clean-up down to the last container,
// sandbox and network namespace. TestServices follows issue 15's path
// through the node's proxy: kubectl expose, fetches by ClusterIP from
// another pod balanced over the pods, scale and readiness followed, a
// NodePort on the node's address, the rules gone with the Service, and the
// apiserver at https://10.96.0.1 from a pod (testdata/tlsget checks its
// certificate); TestServicesOnJoinedNode the same from a node added with
// cairn kubelet. TestPortableBinary runs a copy of the
// binary outside the checkout, in an empty directory with no Go toolchain
// on PATH, to Ready pods and a stop that leaves no process behind.
// TestE2EDaemonSet has a DaemonSet's pod placed on the node by the
// scheduler, run in containerd and rolled by a template change. It needs
// root, containerd, runc, the CNI plugins (ops/node-deps.sh) and
// /usr/bin/kubectl, and skips otherwise.
//
// The benchmark BenchmarkKubelet (go tool task bench:kubelet) measures pod
// start-up latency as Kubernetes' SLO does (creation to the status that
// makes the pod Running): 30 pods at once on the real node of a `cairn up`,
// and 10,000 pods of 100 Deployments on 1,000 hollow nodes through the real
// controller-manager and scheduler.
//
// TestE2EStorage is issue 18's path on the node: the default StorageClass
// standard and the driver's CSINode out of the box, a claim provisioned
// and bound for its pod, written and read again by a new pod, kept mounted
// across a SIGKILLed cairn up and unmounted by a later delete, Delete and
// Retain reclaim, and a StatefulSet's replacement pod reading its claim.
//
// TestE2EStatefulSet runs a StatefulSet of 2 behind a headless Service on
// the node: db-0 then db-1 in containerd, each with its hostname (kubectl
// exec), and a deleted db-0 back under its name.
package e2etest
