package replicaset

import "github.com/cairn-dev/cairn/services/controllers/podcontrol"

// ExpectationsTimeout is how long expectations hold before a ReplicaSet is
// acted on anyway (kube's ExpectationsTimeout).
const ExpectationsTimeout = podcontrol.ExpectationsTimeout
