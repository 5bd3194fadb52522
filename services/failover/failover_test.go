package failover

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// deadAddr is a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestFailsOverOnDialError(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.Method+" "+string(body))
	}))
	defer srv.Close()
	live := strings.TrimPrefix(srv.URL, "https://")
	dead := deadAddr(t)
	e, err := New([]string{dead, "https://" + live}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := e.Wrap(&rest.Config{TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if rc.Host != "https://"+dead {
		t.Fatalf("Wrap host %q, want the first address", rc.Host)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	// A POST with a body is re-sent to the next address: the dial failed,
	// so nothing reached the dead one.
	resp, err := hc.Post(rc.Host+"/x", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatalf("request through a dead first address: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "POST hello" {
		t.Errorf("body %q, want the request re-sent whole", b)
	}
	if e.Current() != live {
		t.Errorf("current %q after the failover, want %q", e.Current(), live)
	}

	// Every address dead: an error, not a hang or a loop.
	e2, _ := New([]string{deadAddr(t), deadAddr(t)}, nil)
	hc2, _ := rest.HTTPClientFor(e2.Wrap(&rest.Config{TLSClientConfig: rest.TLSClientConfig{Insecure: true}}))
	if _, err := hc2.Get("https://" + e2.Current() + "/"); err == nil {
		t.Error("a request with every apiserver dead succeeded")
	}
}

func TestSetKeepsCurrentAndSeeds(t *testing.T) {
	var changes [][]string
	e, err := New([]string{"10.0.0.1:6443", "10.0.0.2:6443"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.OnChange = func(h []string) { changes = append(changes, h) }
	e.failed("10.0.0.1:6443", nil) // current is now 10.0.0.2
	e.Set([]string{"10.0.0.3:6443", "10.0.0.2:6443"})
	want := []string{"10.0.0.3:6443", "10.0.0.2:6443", "10.0.0.1:6443"}
	if got := e.Hosts(); !slices.Equal(got, want) {
		t.Errorf("hosts %v, want %v (the refreshed list, then the seeds)", got, want)
	}
	if e.Current() != "10.0.0.2:6443" {
		t.Errorf("current %q, want the one in use", e.Current())
	}
	e.Set(nil)
	e.Set([]string{"10.0.0.3:6443", "10.0.0.2:6443"})
	if len(changes) != 1 {
		t.Errorf("OnChange called %d times, want once (an empty or equal list changes nothing)", len(changes))
	}
	if _, err := New([]string{"no-port"}, nil); err == nil {
		t.Error("an address without a port is accepted")
	}
}
