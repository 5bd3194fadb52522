package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// ctxFor is a test-bounded context.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// call is one raw HTTP request to the apiserver.
type call struct {
	method, path string
	// contentType defaults to application/json when body is set.
	contentType string
	body        []byte
	// token defaults to the admin token; "-" sends none.
	token  string
	header http.Header
}

// reply is what the apiserver answered.
type reply struct {
	code   int
	body   []byte
	header http.Header
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

func do(t testing.TB, env *controlplanetest.Env, c call) reply {
	t.Helper()
	req, err := http.NewRequest(c.method, env.URL+c.path, bytes.NewReader(c.body))
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if c.body == nil {
		req.Body = nil
		req.ContentLength = 0
	}
	ct := c.contentType
	if ct == "" && c.body != nil {
		ct = "application/json"
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	switch c.token {
	case "":
		req.Header.Set("Authorization", "Bearer "+controlplanetest.AdminToken)
	case "-":
	default:
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, vs := range c.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", c.method, c.path, err)
	}
	return reply{code: resp.StatusCode, body: b, header: resp.Header}
}

// status decodes a reply as a metav1.Status and checks that it is one whose
// code matches the HTTP code.
func status(t testing.TB, r reply) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("reply %d is not JSON: %v: %q", r.code, err, r.body)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" {
		t.Fatalf("reply %d is not a Status: %s", r.code, r.body)
	}
	if int(st.Code) != r.code {
		t.Fatalf("Status code %d, HTTP code %d: %s", st.Code, r.code, r.body)
	}
	return st
}

// logMark is a position in etcd and in the log.
type logMark struct {
	etcdRev int64
	seq     uint64
}

// settle waits until the log holds the last apiserver write and returns the
// current etcd revision and log position.
func settle(t testing.TB, env *controlplanetest.Env) logMark {
	t.Helper()
	rev := controlplanetest.WaitForLog(t, env)
	return logMark{etcdRev: rev, seq: lastSeq(t, env)}
}

func etcdRev(t testing.TB, env *controlplanetest.Env) int64 {
	t.Helper()
	resp, err := env.Etcd.Get(ctxFor(t, 10*time.Second), events.MetaKey)
	if err != nil {
		t.Fatalf("etcd get: %v", err)
	}
	return resp.Header.Revision
}

func lastSeq(t testing.TB, env *controlplanetest.Env) uint64 {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	s, err := env.JS.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info.State.LastSeq
}

// publishGrace is how long a test gives the publisher to publish a write
// it should not have seen.
const publishGrace = 200 * time.Millisecond

// requireNothingWritten fails unless etcd and the log are where m left them.
func requireNothingWritten(t testing.TB, env *controlplanetest.Env, m logMark) {
	t.Helper()
	time.Sleep(publishGrace)
	if got := etcdRev(t, env); got != m.etcdRev {
		t.Errorf("etcd revision moved from %d to %d", m.etcdRev, got)
	}
	if got := lastSeq(t, env); got != m.seq {
		t.Errorf("log moved from sequence %d to %d", m.seq, got)
	}
}

// eventsSince waits for the log to catch up and returns every event after m.
func eventsSince(t testing.TB, env *controlplanetest.Env, m logMark) []events.Event {
	t.Helper()
	now := settle(t, env)
	ctx := ctxFor(t, 20*time.Second)
	s, err := env.JS.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	var out []events.Event
	for seq := m.seq + 1; seq <= now.seq; seq++ {
		msg, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		var ev events.Event
		if err := json.Unmarshal(msg.Data, &ev); err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		out = append(out, ev)
	}
	return out
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func labeledPod(name string, labels map[string]string) *corev1.Pod {
	p := testPod(name)
	p.Labels = labels
	return p
}

func testDeployment(name string, replicas int32) *appsv1.Deployment {
	return controlplanetest.Deployment("", name, replicas, corev1.Container{Name: "c", Image: "busybox:1.36"})
}

const (
	podsPath     = "/api/v1/namespaces/default/pods"
	servicesPath = "/api/v1/namespaces/default/services"
)

// invalidCase is one request the apiserver must refuse with 422 Invalid.
type invalidCase struct {
	name string
	send func() error
	// wantCauses are the fields of the causes, sorted.
	wantCauses []string
}

// runInvalidCases sends each case as a subtest and checks it with
// wantInvalid.
func runInvalidCases(t *testing.T, env *controlplanetest.Env, group, kind string, tests []invalidCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantInvalid(t, env, group, kind, tt.wantCauses, tt.send)
		})
	}
}

// wantInvalid checks that send is refused with 422 Invalid for kind, with
// causes on exactly the fields named, and that nothing was written.
func wantInvalid(t *testing.T, env *controlplanetest.Env, group, kind string, causes []string, send func() error) {
	t.Helper()
	before := settle(t, env)
	err := send()
	var se *apierrors.StatusError
	if !apierrors.IsInvalid(err) || !errors.As(err, &se) {
		t.Fatalf("got %v, want 422 Invalid", err)
	}
	st := se.ErrStatus
	if st.Code != http.StatusUnprocessableEntity || st.Details == nil || st.Details.Kind != kind || st.Details.Group != group {
		t.Errorf("status %+v", st)
	}
	var fields []string
	for _, c := range st.Details.Causes {
		fields = append(fields, c.Field)
	}
	slices.Sort(fields)
	if !slices.Equal(fields, causes) {
		t.Errorf("causes %v, want %v: %s", fields, causes, st.Message)
	}
	requireNothingWritten(t, env, before)
}

// tableOf asks for path as a Table and returns its column names and the
// cells of its rows.
func tableOf(t *testing.T, env *controlplanetest.Env, path string) ([]string, [][]any) {
	t.Helper()
	r := do(t, env, call{method: http.MethodGet, path: path, header: http.Header{"Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io"}}})
	var tbl metav1.Table
	if err := json.Unmarshal(r.body, &tbl); r.code != http.StatusOK || err != nil {
		t.Fatalf("%d %v: %s", r.code, err, truncate(r.body))
	}
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	rows := make([][]any, len(tbl.Rows))
	for i, r := range tbl.Rows {
		rows[i] = r.Cells
	}
	return cols, rows
}
