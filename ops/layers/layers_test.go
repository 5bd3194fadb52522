package layers

import (
	"os/exec"
	"path"
	"strings"
	"testing"
)

const module = "github.com/cairn-dev/cairn/"

// rules say which packages may not depend, directly or not, on which
// others. Only non-test dependencies count, and test helper packages (a
// name ending in "test", such as consumertest, linked only by tests) are
// exempt: tests may start anything.
var rules = []struct {
	name string
	// pkgs are go list patterns, relative to the module.
	pkgs []string
	// forbidden are import path prefixes.
	forbidden []string
}{
	{
		name: "consumers of the log link no etcd client and no apiserver",
		pkgs: []string{"events", "events/consumer/...", "services/kubelet/...", "services/scheduler/...",
			"services/controllers/...", "services/eventrecord"},
		forbidden: []string{"go.etcd.io/etcd/client/", "go.etcd.io/etcd/server/", module + "services/apiserver",
			module + "events/publish"},
	},
	{
		name: "projections import no service above them",
		pkgs: []string{"projections/..."},
		forbidden: []string{module + "services/cairn", module + "services/controllers", module + "services/controlplane",
			module + "services/scheduler", module + "services/kubelet"},
	},
	{
		name:      "the apiserver imports no projection",
		pkgs:      []string{"services/apiserver/..."},
		forbidden: []string{module + "projections/"},
	},
}

// TestBoundaries runs go list -deps on each rule's packages and fails on
// every forbidden dependency, naming the package that brings it in.
func TestBoundaries(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not on PATH")
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			args := []string{"list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}
			for _, p := range r.pkgs {
				args = append(args, "./"+p)
			}
			cmd := exec.Command("go", args...)
			cmd.Dir = "../.."
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) < len(r.pkgs) {
				t.Fatalf("go list listed %d packages for %d patterns", len(lines), len(r.pkgs))
			}
			for _, line := range lines {
				fields := strings.Fields(line)
				if strings.HasSuffix(path.Base(fields[0]), "test") {
					continue
				}
				for _, dep := range fields[1:] {
					for _, bad := range r.forbidden {
						if strings.HasPrefix(dep, bad) {
							t.Errorf("%s depends on %s", fields[0], dep)
						}
					}
				}
			}
		})
	}
}
