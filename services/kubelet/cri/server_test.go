package cri_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	spdystream "k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

func (r *rig) serverURL(path string, q url.Values) *url.URL {
	return &url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", r.k.Port()), Path: path, RawQuery: q.Encode()}
}

func (r *rig) logs(ctx context.Context, pod, c string, q url.Values) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.serverURL("/containerLogs/default/"+pod+"/"+c, q).String(), nil)
	return r.https.Do(req)
}

func (r *rig) logsString(pod, c string, q url.Values) string {
	r.t.Helper()
	resp, err := r.logs(context.Background(), pod, c, q)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("logs %v: %d %s", q, resp.StatusCode, b)
	}
	return string(b)
}

func TestServerLogs(t *testing.T) {
	r := newRig(t, nil)
	n, err := r.env.Client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil || n.Status.DaemonEndpoints.KubeletEndpoint.Port != r.k.Port() || r.k.Port() == 0 {
		t.Fatalf("kubelet port in node status: %v %v", n.Status.DaemonEndpoints, err)
	}
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "talk"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Command: sh("echo zero >&2; sleep 1; echo one; printf 'no newline'; echo; echo three; while sleep 0.2; do if [ -e /tmp/go ]; then echo four; exec sleep 3600; fi; done")}}}})
	p := r.waitReady("talk")
	deadline := time.Now().Add(wait)
	for !strings.Contains(r.logsString("talk", "c", nil), "three") {
		if time.Now().After(deadline) {
			t.Fatal("no logs")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := r.logsString("talk", "c", nil); got != "zero\none\nno newline\nthree\n" {
		t.Errorf("all: %q", got)
	}
	if got := r.logsString("talk", "c", url.Values{"tailLines": {"2"}}); got != "no newline\nthree\n" {
		t.Errorf("tailLines=2: %q", got)
	}
	ts := r.logsString("talk", "c", url.Values{"tailLines": {"1"}, "timestamps": {"true"}})
	if tsv, line, ok := strings.Cut(strings.TrimSpace(ts), " "); !ok || line != "three" {
		t.Errorf("timestamps: %q", ts)
	} else if _, err := time.Parse(time.RFC3339Nano, tsv); err != nil {
		t.Errorf("timestamp %q: %v", tsv, err)
	}

	// follow: a line written later arrives on the open stream.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	resp, err := r.logs(ctx, "talk", "c", url.Values{"follow": {"true"}, "tailLines": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if l, _ := br.ReadString('\n'); l != "three\n" {
		t.Fatalf("follow first line %q", l)
	}
	r.exec(p, "c", "touch", "/tmp/go")
	if l, err := br.ReadString('\n'); l != "four\n" {
		t.Fatalf("follow: %q %v", l, err)
	}

	// Unknown pod or container: 404.
	for _, path := range []string{"/containerLogs/default/nope/c", "/containerLogs/default/talk/nope"} {
		resp, err := r.https.Get(r.serverURL(path, nil).String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
}

func TestServerPreviousLogs(t *testing.T) {
	r := newRig(t, nil)
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crash"}, Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		Containers: []corev1.Container{{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/v"}},
			Command: sh("echo run >> /v/n; echo attempt $(wc -l < /v/n); if [ $(wc -l < /v/n) -lt 2 ]; then exit 1; fi; exec sleep 3600")}}}})
	r.waitPod("crash", "restarted and running", func(p *corev1.Pod) bool {
		cs := status(p, "c")
		return cs.RestartCount == 1 && cs.State.Running != nil
	})
	deadline := time.Now().Add(wait)
	for r.logsString("crash", "c", nil) != "attempt 2\n" {
		if time.Now().After(deadline) {
			t.Fatalf("current logs: %q", r.logsString("crash", "c", nil))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := r.logsString("crash", "c", url.Values{"previous": {"true"}}); got != "attempt 1\n" {
		t.Errorf("previous: %q", got)
	}

	// In back-off there is no new container yet: as with kubelet, the
	// current logs and --previous are both those of the run that failed.
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "loop"}, Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		Containers: []corev1.Container{{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/v"}},
			Command: sh("echo run >> /v/n; echo attempt $(wc -l < /v/n); exit 1")}}}})
	inBackOff := func(p *corev1.Pod) bool {
		cs := status(p, "c")
		return cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" && cs.LastTerminationState.Terminated != nil
	}
	// The back-off here is 1 s, so a restart may come between the reads:
	// a round counts only if the pod was in the same back-off before and
	// after them.
	deadline = time.Now().Add(wait)
	for {
		p := r.waitPod("loop", "in back-off", inBackOff)
		restarts := status(p, "c").RestartCount
		cur := r.logsString("loop", "c", nil)
		prev := r.logsString("loop", "c", url.Values{"previous": {"true"}})
		if after := r.get("loop"); !inBackOff(after) || status(after, "c").RestartCount != restarts {
			if time.Now().After(deadline) {
				t.Fatal("the pod never stayed in back-off long enough to read its logs")
			}
			continue
		}
		want := fmt.Sprintf("attempt %d\n", restarts+1)
		if cur != want || prev != want {
			t.Errorf("logs in back-off after %d restarts: current %q, previous %q, want both %q", restarts, cur, prev, want)
		}
		break
	}
}

// TestServerExec runs commands through /exec over websocket (the
// v4.channel.k8s.io protocol: one byte of channel, then data; channel 3
// carries the final status), which the kubelet proxies, upgrade and all,
// to containerd's streaming server inside the node's network namespace.
func TestServerExec(t *testing.T) {
	r := newRig(t, nil)
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ex"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Command: []string{"sleep", "3600"}}}}})
	r.waitReady("ex")
	tests := []struct {
		name              string
		q                 url.Values
		stdin             string
		wantOut, wantErr  string
		wantStatusContain string
	}{
		{name: "stdout and stderr", q: url.Values{"command": {"sh", "-c", "cat /etc/hostname; echo oops >&2"}, "stdout": {"1"}, "stderr": {"1"}},
			wantOut: "ex\n", wantErr: "oops\n", wantStatusContain: `"Success"`},
		{name: "stdin", q: url.Values{"command": {"sh", "-c", "head -n1 | tr a-z A-Z"}, "stdin": {"1"}, "stdout": {"1"}, "stderr": {"1"}},
			stdin: "hello\n", wantOut: "HELLO\n", wantStatusContain: `"Success"`},
		{name: "exit code", q: url.Values{"command": {"sh", "-c", "exit 3"}, "stdout": {"1"}, "stderr": {"1"}},
			wantStatusContain: `"NonZeroExitCode"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, st := r.wsExec(t, "ex", "c", tt.q, tt.stdin)
			if out != tt.wantOut || errs != tt.wantErr || !strings.Contains(st, tt.wantStatusContain) {
				t.Errorf("stdout %q stderr %q status %q", out, errs, st)
			}
		})
	}
	// Not found, not running: plain errors, no upgrade.
	resp, err := r.https.Get(r.serverURL("/exec/default/nope/c", url.Values{"command": {"true"}}).String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown pod: %d", resp.StatusCode)
	}
}

// wsDial opens a websocket (v4.channel.k8s.io) to the kubelet's path with
// query q, as the apiserver's kubelet client.
func (r *rig) wsDial(t *testing.T, path string, q url.Values) *websocket.Conn {
	t.Helper()
	u := r.serverURL(path, q)
	u.Scheme = "wss"
	d := websocket.Dialer{TLSClientConfig: r.pki.KubeletClientTLSConfig(), Subprotocols: []string{"v4.channel.k8s.io"},
		HandshakeTimeout: 10 * time.Second}
	conn, resp, err := d.Dial(u.String(), nil)
	if err != nil {
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("dial: %v: %d %s", err, resp.StatusCode, b)
		}
		t.Fatalf("dial: %v", err)
	}
	return conn
}

// wsExec runs one exec over websocket and returns stdout, stderr and the
// status message of channel 3.
func (r *rig) wsExec(t *testing.T, pod, c string, q url.Values, stdin string) (string, string, string) {
	t.Helper()
	conn := r.wsDial(t, "/exec/default/"+pod+"/"+c, q)
	defer conn.Close()
	if stdin != "" {
		if err := conn.WriteMessage(websocket.BinaryMessage, append([]byte{0}, stdin...)); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	var status string
	conn.SetReadDeadline(time.Now().Add(wait))
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			break
		}
		if len(msg) == 0 {
			continue
		}
		switch msg[0] {
		case 1:
			out.Write(msg[1:])
		case 2:
			errb.Write(msg[1:])
		case 3:
			status += string(msg[1:])
		}
	}
	return out.String(), errb.String(), status
}

// TestServerPortForward: a port forward through the kubelet's server
// reaches a port inside the pod's network namespace, with client-go's
// SPDY port forwarder (what kubectl port-forward falls back to).
func TestServerPortForward(t *testing.T) {
	r := newRig(t, nil)
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pf"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Command: []string{"sh", "-c", "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 1}}}}})
	r.waitReady("pf")

	rt, err := spdystream.NewRoundTripper(r.pki.KubeletClientTLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(rt, &http.Client{Transport: rt}, http.MethodPost, r.serverURL("/portForward/default/pf", nil))
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("forward ports: %v", err)
		}
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("forward ports: %v", err)
	case <-time.After(wait):
		t.Fatal("the port forward did not get ready")
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // two connections over one forward
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", ports[0].Local))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "pf\n" {
			t.Errorf("through the forward: %d %q, want 200 with the pod's hostname", resp.StatusCode, b)
		}
	}

	// A missing pod, a bad port: plain errors, no upgrade.
	for path, want := range map[string]int{"/portForward/default/nope": http.StatusNotFound, "/portForward/default/pf?port=x": http.StatusBadRequest} {
		u := r.serverURL(path, nil)
		u.Path, u.RawQuery, _ = strings.Cut(path, "?")
		resp, err := r.https.Post(u.String(), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// TestServerAttach: an attach through the kubelet's server streams what the
// container's main process writes from then on (websocket, channel 1).
func TestServerAttach(t *testing.T) {
	r := newRig(t, nil)
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "at"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Command: []string{"sh", "-c", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"}}}}})
	r.waitReady("at")
	conn := r.wsDial(t, "/attach/default/at/c", url.Values{"stdout": {"1"}, "stderr": {"1"}})
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(wait))
	var out bytes.Buffer
	for strings.Count(out.String(), "\n") < 2 {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("read after %q: %v", out.String(), err)
		}
		if len(msg) > 0 && msg[0] == 1 {
			out.Write(msg[1:])
		}
	}
	if !regexp.MustCompile(`^tick \d+\ntick \d+\n`).MatchString(out.String()) {
		t.Errorf("attached stdout %q, want the ticks", out.String())
	}
	// Not found: a plain error, no upgrade.
	nf, err := r.https.Get(r.serverURL("/attach/default/nope/c", url.Values{"stdout": {"1"}}).String())
	if err != nil {
		t.Fatal(err)
	}
	nf.Body.Close()
	if nf.StatusCode != http.StatusNotFound {
		t.Errorf("attach to an unknown pod: %d", nf.StatusCode)
	}
}
