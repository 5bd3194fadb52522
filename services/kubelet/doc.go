// Package kubelet is cairn's node agent. It registers its Node, keeps a
// heartbeat Lease, reads its own node's pods from the log, and runs them
// through a container runtime (container.Runtime: CRI on containerd, or
// the hollow runtime for scale tests), reporting their status through
// pods/status as the Kubernetes kubelet does.
//
// # Reading only its own pods
//
// The pod cache (a consumer.Manager's, consumer.OnNode) lists
// fieldSelector=spec.nodeName=<node> once, then tails the log with the
// subject filter cairn.ev.core.pods.<node>.*.* applied by the NATS server:
// the kubelet receives the events of its own pods and nothing else, so its
// traffic grows with its pods, not with the cluster
// (TestTrafficIsOwnPodsOnly).
//
// # Node, lease, node status
//
// Run registers the Node (or takes over an existing one of that name):
// capacity and allocatable from the machine or Config, InternalIP and
// Hostname addresses, the kubelet's HTTPS port in
// status.daemonEndpoints.kubeletEndpoint, the Ready, MemoryPressure,
// DiskPressure and PIDPressure conditions and node info. It renews the
// Lease kube-node-lease/<node> every 10 s, and writes the Node status
// when it changes (and every 5 minutes regardless, as the kubelet's
// nodeStatusReportFrequency). A new spec.podCIDR is handed to the runtime.
//
// # Pod workers
//
// Every pod UID has one worker goroutine; its syncs never overlap. A sync
// is level-triggered, like the kubelet's syncPod: it compares the pod in
// the cache with what the runtime holds for that UID (sandboxes and
// containers are labelled with the pod UID, container name and attempt)
// and takes the next step: volumes, a sandbox, the init containers in
// order, then the app containers; restarts by restartPolicy with
// exponential back-off (the first restart at once, then 10 s doubling to 5
// minutes; CrashLoopBackOff meanwhile); liveness and startup failures kill
// the container. Then it computes the status (phase, conditions,
// container statuses as Kubernetes shows them) and writes it only if it
// changed. Workers are kicked by pod events, by the relist (a poll of the
// runtime every second, the kubelet's PLEG: a container that exits), by
// probe results, and run at least every ResyncPeriod.
//
// Deleting a pod (deletionTimestamp set) stops its containers with the
// grace period (SIGTERM, then SIGKILL), writes the final status, removes
// the containers, the sandbox and the pod's directories, and then deletes
// the pod with gracePeriodSeconds=0 and its UID as precondition. A pod the
// API no longer has (force-deleted) is killed and removed.
//
// # Restart safety
//
// All state lives in the runtime. A restarted kubelet lists the runtime,
// starts a worker for every pod UID it finds, and adopts running
// containers as they are: a worker only creates a container when the
// runtime has none running for that name in the current sandbox, so
// nothing is started twice. Pods the API no longer has are removed.
//
// # Causation
//
// Every write of a worker (status, the final delete, its Events) is made
// with consumer.WithCause of the last pod event that was not the echo of
// its own status write: the binding (or creation) for a starting pod, the
// delete for a terminating one.
//
// # Events
//
// Like the kubelet, it records core/v1 Events (source kubelet, host the
// node; what kubectl describe lists), through an eventrecord.Recorder with
// a client of its own built from Config.RestConfig (50 writes per second,
// bursts of 100: the kubelet's eventRecordQPS). Reasons and messages are
// the kubelet's; the events about a container refer to the pod with
// fieldPath spec.containers{NAME} or spec.initContainers{NAME}:
//
//   - images (ensureImage): Pulling "Pulling image ..." before a pull;
//     Pulled "Successfully pulled image ... in ... (... including
//     waiting). Image size: N bytes." after one, or "Container image ...
//     already present on machine"; Warning Failed "Failed to pull image
//     ...: ERR"; Normal BackOff "Back-off pulling image ..." during the
//     pull back-off; Warning ErrImageNeverPull, and InspectFailed when the
//     runtime cannot tell whether the image is there. Each failure adds
//     Warning Failed "Error: ErrImagePull" (ImagePullBackOff,
//     ErrImageNeverPull, ImageInspectError), as the kubelet's container
//     start does.
//   - containers (startContainer): Created "Created container: NAME",
//     Started "Started container NAME", Warning Failed "Error: ERR" when
//     building, creating or starting it fails; Warning BackOff "Back-off
//     restarting failed container NAME in pod NAME_NAMESPACE(UID)" on
//     every sync that the crash-loop back-off holds a restart back;
//     Killing "Stopping container NAME" when a deleted or finished pod's
//     (or a dead sandbox's) containers are stopped, and "Container NAME
//     failed liveness probe, will be restarted" (or startup) when a probe
//     kills it.
//   - probes: Warning Unhealthy "Liveness probe failed: OUTPUT" (Readiness,
//     Startup) for every failed probe; the recorder's correlator turns the
//     repeats into one event with a count.
//   - the pod: Warning FailedMount "MountVolume.SetUp failed for volume
//     "VOL" : ERR" and Warning FailedCreatePodSandBox "Failed to create pod
//     sandbox: ERR".
//   - volume expansion (a claim the external-resizer left at
//     storage=NodeResizePending, for a pod's running sync or its mount):
//     Normal FileSystemResizeSuccessful "MountVolume.NodeExpandVolume
//     succeeded for volume "PV" NODE" on the pod and the claim, whose
//     status.capacity then becomes the PV's and whose resize conditions
//     go; Warning VolumeResizeFailed on the pod when NodeExpandVolume
//     fails (the claim gets NodeResizeError, and NodeResizeInfeasible for
//     InvalidArgument or OutOfRange, which ends the retries).
//   - the node (kind Node, its name as UID, in namespace default):
//     Starting "Starting kubelet." when Run starts, and "Node NAME status
//     is now: NodeReady" (NodeNotReady, NodeHasSufficientMemory,
//     NodeHasNoDiskPressure, NodeHasSufficientPID ...) when a condition's
//     status changes, its first report included: the kubelet's first
//     report is NotReady, so it records NodeReady soon after it starts,
//     and so does this one, which is Ready from the start.
//
// Events are written asynchronously. Those a pod's sync records carry its
// cause (see Causation); probe results and the node's have none.
// Containers of a pod already gone from the API are stopped without an
// event.
//
// # HTTPS API
//
// With Config.ServerAddr or ServerListener the kubelet serves the part of
// the kubelet's API that the apiserver proxies pods/log and pods/exec to:
// /containerLogs/{ns}/{pod}/{container} and /exec/{ns}/{pod}/{container}
// (and an open /healthz), over TLS with a self-signed certificate unless
// Config.ServerTLS gives one. Like a kubelet with --anonymous-auth=false,
// --client-ca-file and an authorizer, it authenticates clients by a TLS
// client certificate verified against Config.ClientCAs (CN the user, O the
// groups) and authorizes them as nodes/proxy of its node (GET is verb get,
// POST create): only group system:masters is allowed, which the
// apiserver's kubelet client certificate (pki.KubeletClientUser) is in. A
// request without a verified certificate gets 401 "Unauthorized", a denied
// one 403 "Forbidden (user=..., verb=..., resource=nodes,
// subresource=proxy)". Without ClientCAs nobody authenticates: logs and
// exec always answer 401.
//
// # Hollow nodes
//
// RunHollow runs many kubelets with the hollow runtime in one process,
// sharing one client and the caller's NATS connection; each has its own
// pod cache, filtered on the server. Their Nodes carry the label
// cairn.dev/hollow=true and say so in their Ready condition and node
// info; they run no containers and never probe. They record no Events
// either (no recorder, client or queue): they have no images or
// containers to report on, and a thousand recorders in one process would
// cost more than the nodes themselves.
package kubelet
