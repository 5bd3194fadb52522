// Package historytest is the binary-level test of the history projection:
// it has no code of its own, only tests.
//
// TestRestart builds the cairn binary, runs `cairn up` as a child process
// on its own data directory, registers a node and stands in for that
// node's kubelet through the API (the pods the real scheduler binds there
// are reported Running and Ready through pods/status, at most as many as
// the test allows, and graceful deletes are finished). It applies a
// 5-replica Deployment with the real kubectl, stops cairn with SIGTERM
// mid-rollout and starts it again on the same directory; changes the image
// with kubectl set image and kills cairn with SIGKILL mid-rollout; starts
// it again and lets the rollout finish. Then it checks, through the cairn
// commands, that the history projection caught up and holds every event of
// the log exactly once: `cairn audit -o json` against `cairn events tail
// --no-follow --json`, and `cairn timeline deployment/web -o json` against
// the log's events of every object of the chain.
//
// It also rebuilds a second data directory with `cairn replay --to <rev>`
// from the running cluster, serves it with a second `cairn up`, and checks
// that the Deployment, ReplicaSets, Pods and Node listed at that revision
// are the same on both, and that `cairn events verify` passes there.
//
// The test is skipped when kubectl is not installed or with -short:
//
//	go test ./services/cairn/historytest -v
package historytest
