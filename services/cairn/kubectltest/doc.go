// Package kubectltest is the kubectl acceptance test of the apiserver.
//
// It has no code of its own, only tests. The test builds the cairn binary,
// runs `cairn up` as a child process on a free loopback port with its own
// data directory, and drives the machine's real kubectl against it with the
// kubeconfig cairn writes: apply, get in every output format, selectors,
// patch, scale, watch, describe, create, label, annotate, delete, explain,
// api-resources, error messages, PodDisruptionBudgets (create pdb, get pdb,
// patch, validation errors), Services (create service, expose, get svc -o
// wide, describe svc, the kubernetes Service's endpoints and slice,
// explain, validation errors), the workload kinds (create job, create
// cronjob, create job --from=cronjob, get ds,sts,job,cj,controllerrevisions,
// apply and apply --server-side, describe, scale sts, validation errors),
// and a restart on the same data directory.
//
// `cairn up` also runs the controllers, so the Deployment the test applies
// gets ReplicaSets and pods; nothing schedules or runs those pods, so they
// stay Pending and a rolling update never finishes. The test expects them
// in every listing, and checks through kubectl what the controllers did:
// a ReplicaSet per template named after its pod-template-hash, its pods,
// proportional scaling within the surge, and garbage collection of both
// when the Deployment is deleted.
//
// TestKubectlControllers runs a second `cairn up` of its own with a
// stand-in kubelet in the test process, which reports every pod Running and
// Ready through pods/status (except pods whose image contains "broken"). It
// drives a Deployment through kubectl create, rollout status, scale, set
// image, rollout history, undo, pause and resume, a rollout that exceeds its
// progress deadline, and delete with each cascade mode (background,
// foreground, orphan).
//
// TestKubectlDaemonSet runs a `cairn up` with three hollow nodes (`cairn
// kubelet --runtime hollow`) and drives a DaemonSet through apply, rollout
// status, get ds, set image, rollout history, undo and restart, invalid
// specs (422) and delete.
//
// TestKubectlStatefulSet, with a cairn up and stand-in kubelet of its own,
// brings up a StatefulSet of 3 in order behind its headless Service,
// deletes a pod and sees it come back under its name, and drives rollout
// status, set image, rollout history, rollout undo, scale and the
// refused changes of immutable fields.
//
// The tests are skipped when kubectl is not installed or with -short. Run
// them with
//
//	go test ./services/cairn/kubectltest -v
//
// A failing kubectl call is reported with its arguments, stdout and stderr;
// rerun the command by hand with -v=8 against a `cairn up` to see the
// requests and responses.
package kubectltest
