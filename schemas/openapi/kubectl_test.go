package openapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/schemas/discovery"
	"github.com/cairn-dev/cairn/schemas/openapi"
)

const kubectlPath = "/usr/bin/kubectl"

// kubectlServer serves only the discovery and OpenAPI handlers, and a
// kubeconfig pointing at it.
func kubectlServer(t *testing.T) (kubeconfig string) {
	t.Helper()
	if _, err := os.Stat(kubectlPath); err != nil {
		t.Skipf("no kubectl at %s", kubectlPath)
	}
	resources := testResources()
	oapi, err := openapi.Handler(resources)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/openapi/", oapi)
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"32","gitVersion":"v1.32.0"}`)
	})
	mux.Handle("/", discovery.Handler(resources))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	kubeconfig = filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
contexts:
- name: test
  context:
    cluster: test
    namespace: default
current-context: test
users: []
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

func kubectl(t *testing.T, kubeconfig string, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := filepath.Dir(kubeconfig)
	args = append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)
	cmd := exec.CommandContext(ctx, kubectlPath, args...)
	cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args[4:], " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// wantLines checks that each pattern matches some line of out, with runs
// of blanks in the line collapsed to one space.
func wantLines(t *testing.T, out string, patterns ...string) {
	t.Helper()
	var lines []string
	space := regexp.MustCompile(`[ \t]+`)
	for l := range strings.SplitSeq(out, "\n") {
		lines = append(lines, strings.TrimSpace(space.ReplaceAllString(l, " ")))
	}
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		found := false
		for _, l := range lines {
			if re.MatchString(l) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no line matches %q in:\n%s", p, out)
		}
	}
}

func TestKubectl(t *testing.T) {
	kubeconfig := kubectlServer(t)
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  []string
	}{
		{
			name: "api-resources",
			args: []string{"api-resources"},
			want: []string{
				`^NAME SHORTNAMES APIVERSION NAMESPACED KIND$`,
				`^namespaces ns v1 false Namespace$`,
				`^pods po v1 true Pod$`,
				`^deployments deploy apps/v1 true Deployment$`,
			},
		},
		{
			name: "api-resources wide",
			args: []string{"api-resources", "-o", "wide", "--api-group", "apps"},
			want: []string{`^deployments deploy apps/v1 true Deployment create,delete,deletecollection,get,list,patch,update,watch all$`},
		},
		{
			name: "explain pods.spec.containers",
			args: []string{"explain", "pods.spec.containers"},
			want: []string{
				`^KIND: Pod$`,
				`^VERSION: v1$`,
				`^FIELD: containers <\[\]Container>$`,
				`^List of containers belonging to the pod\.`,
				`^A single application container that you want to run within a pod\.$`,
				`^image <string>$`,
				`^name <string> -required-$`,
				`^resources <ResourceRequirements>$`,
				`^ports <\[\]ContainerPort>$`,
			},
		},
		{
			name: "explain deployment.spec.strategy",
			args: []string{"explain", "deployment.spec.strategy"},
			want: []string{
				`^GROUP: apps$`,
				`^KIND: Deployment$`,
				`^FIELD: strategy <DeploymentStrategy>$`,
				`^The deployment strategy to use to replace existing pods with new ones\.$`,
				`^rollingUpdate <RollingUpdateDeployment>$`,
				`^type <string>$`,
			},
		},
		{
			name: "explain quantities and int-or-string",
			args: []string{"explain", "deployment.spec.strategy.rollingUpdate.maxSurge"},
			want: []string{`^FIELD: maxSurge <IntOrString>$`},
		},
		{
			name: "explain openapi v2",
			args: []string{"explain", "pods.spec.containers", "--output=plaintext-openapiv2"},
			// The v2 printer names nested kinds "Object".
			want: []string{
				`^RESOURCE: containers <\[\]Object>$`,
				`^List of containers belonging to the pod\.`,
				`^image <string>$`,
				`^name <string> -required-$`,
			},
		},
		{
			name: "apply dry-run client",
			args: []string{"apply", "--dry-run=client", "-f", "-"},
			stdin: `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
        resources:
          limits: {cpu: 500m, memory: 1Gi}
`,
			want: []string{`^deployment.apps/web created \(dry run\)$`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantLines(t, kubectl(t, kubeconfig, tt.stdin, tt.args...), tt.want...)
		})
	}
}
