package apitest

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestProfiling: /debug/pprof/ as kube-apiserver's --profiling serves it,
// to cluster-admin only, and not at all with --profiling=false.
func TestProfiling(t *testing.T) {
	get := func(env *controlplanetest.Env, token, path string, params ...string) (string, error) {
		cs := kubernetes.NewForConfigOrDie(env.ConfigFor(token))
		req := cs.Discovery().RESTClient().Get().AbsPath(path)
		for i := 0; i+1 < len(params); i += 2 {
			req.Param(params[i], params[i+1])
		}
		b, err := req.DoRaw(context.Background())
		return string(b), err
	}
	env := controlplanetest.Start(t)
	if out, err := get(env, controlplanetest.AdminToken, "/debug/pprof/"); err != nil || !strings.Contains(out, "goroutine") {
		t.Fatalf("admin /debug/pprof/: %v: %.200s", err, out)
	}
	if out, err := get(env, controlplanetest.AdminToken, "/debug/pprof/goroutine", "debug", "1"); err != nil || !strings.Contains(out, "goroutine profile:") {
		t.Fatalf("admin goroutine profile: %v: %.200s", err, out)
	}
	if _, err := get(env, controlplanetest.UserToken, "/debug/pprof/"); !apierrors.IsForbidden(err) {
		t.Fatalf("an ordinary user's /debug/pprof/: %v, want 403", err)
	}

	off := controlplanetest.Start(t, controlplanetest.Options{DisableProfiling: true})
	if _, err := get(off, controlplanetest.AdminToken, "/debug/pprof/"); !apierrors.IsNotFound(err) {
		t.Fatalf("/debug/pprof/ with profiling off: %v, want 404", err)
	}
}
