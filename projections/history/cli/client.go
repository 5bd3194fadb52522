package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/projections/history/web"
)

// ErrUsage means the flags were wrong; the flag package has already
// printed the usage to stderr. Map it to exit code 2.
var ErrUsage = errors.New("usage")

// Prefix is where the lead mounts web.Handler on the apiserver.
const Prefix = "/history/"

// Env is what the binary gives a command: its flag set, on which the
// binary has registered the flags its commands share (--data-dir and
// --kubeconfig, so that every cairn command spells and resolves them
// alike), and how to reach the cluster those flags name.
type Env struct {
	// Flags is the command's flag set; it reports errors rather than
	// exiting (flag.ContinueOnError). The command adds its own flags and
	// parses it.
	Flags *flag.FlagSet
	// RESTConfig returns the config of the apiserver that the parsed flags
	// name. The query commands call it unless --db is given; nil is fine
	// for callers that always give --db.
	RESTConfig func() (*rest.Config, error)
}

// conn are the flags that locate the history: a running cluster's API
// (Env.RESTConfig) or a store file opened directly.
type conn struct {
	env       Env
	db        string
	natsURL   string
	namespace string // of the object, for commands about one
	output    string
}

func (c *conn) register(env Env) {
	c.env = env
	fs := env.Flags
	fs.StringVar(&c.db, "db", "", "query this history store file directly instead of the apiserver")
	fs.StringVar(&c.natsURL, "nats-url", "", "with --db: bring the store up to date from this NATS first")
	fs.StringVar(&c.output, "o", "text", "output: text or json")
}

// asJSON reports whether the output is JSON.
func (c *conn) asJSON() bool { return c.output == "json" }

// registerObject registers the flags of a command about one object.
func (c *conn) registerObject(env Env) {
	c.register(env)
	env.Flags.StringVar(&c.namespace, "n", "default", "namespace of the object (empty for a cluster-scoped one)")
}

// client answers API requests, remotely or from a local store.
type client struct {
	get   func(ctx context.Context, path string, q url.Values) (*http.Response, error)
	close func()
}

func (c *conn) open(ctx context.Context) (*client, error) {
	if c.db != "" {
		return c.openLocal(ctx)
	}
	if c.env.RESTConfig == nil {
		return nil, errors.New("no cluster to query: give --db")
	}
	cfg, err := c.env.RESTConfig()
	if err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("history api: %w", err)
	}
	base := strings.TrimSuffix(cfg.Host, "/") + Prefix
	return &client{
		get: func(ctx context.Context, path string, q url.Values) (*http.Response, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path+"?"+q.Encode(), nil)
			if err != nil {
				return nil, err
			}
			return hc.Do(req)
		},
		close: func() {},
	}, nil
}

func (c *conn) openLocal(ctx context.Context) (*client, error) {
	st, err := store.Open(c.db, store.Options{ReadOnly: c.natsURL == ""})
	if err != nil {
		return nil, err
	}
	if c.natsURL != "" {
		nc, err := nats.Connect(c.natsURL)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("nats %s: %w", c.natsURL, err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err == nil {
			err = store.NewIngester(st, js, store.IngestConfig{}).CatchUp(ctx)
		}
		if err != nil {
			st.Close()
			return nil, err
		}
	}
	h := web.Handler(st, Prefix)
	return &client{
		get: func(ctx context.Context, path string, q url.Values) (*http.Response, error) {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, Prefix+path+"?"+q.Encode(), nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Result(), nil
		},
		close: func() { st.Close() },
	}, nil
}

// call GETs api/<path> and decodes the JSON answer into out.
func (c *client) call(ctx context.Context, path string, q url.Values, out any) error {
	resp, err := c.get(ctx, "api/"+path, q)
	if err != nil {
		return fmt.Errorf("history api: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("history api: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("history api: %s", resp.Status)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("history api: %w", err)
	}
	return nil
}

// parse parses flags and between minPos and maxPos positional arguments,
// which may come before or after the flags, and checks the flags with ok
// (if not nil). On a usage error it prints the usage and returns ErrUsage;
// on -h, flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string, minPos, maxPos int, ok func() bool) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp
			}
			return nil, ErrUsage
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	if len(pos) > maxPos {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %s\n", strings.Join(pos[maxPos:], " "))
	}
	if len(pos) < minPos || len(pos) > maxPos || (ok != nil && !ok()) {
		fs.Usage()
		return nil, ErrUsage
	}
	return pos, nil
}

// openObject parses the flags and the <kind>/<name> argument of a command
// about one object, then opens the history; q names the object.
func (c *conn) openObject(ctx context.Context, args []string, ok func() bool) (cl *client, q url.Values, err error) {
	pos, err := parse(c.env.Flags, args, 1, 1, ok)
	if err != nil {
		return nil, nil, err
	}
	kind, name, err := splitRef(pos[0])
	if err != nil {
		return nil, nil, err
	}
	if cl, err = c.open(ctx); err != nil {
		return nil, nil, err
	}
	return cl, url.Values{"kind": {kind}, "name": {name}, "namespace": {c.namespace}}, nil
}

// splitRef splits "kind/name".
func splitRef(s string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || kind == "" || name == "" {
		return "", "", fmt.Errorf("want <kind>/<name>, got %q", s)
	}
	return kind, name, nil
}
