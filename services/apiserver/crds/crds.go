package crds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/schemas/codec"
	"github.com/cairn-dev/cairn/schemas/custom"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
)

const (
	group    = "apiextensions.k8s.io"
	resource = "customresourcedefinitions"
)

// Config is what a Controller needs.
type Config struct {
	Store    *storage.Store
	Hub      *watchhub.Hub
	Registry *schemas.Registry
	// Loopback reaches the apiserver in-process (apiserver.Server.Loopback);
	// nil runs the follower only (no status writes, no cleanup).
	Loopback http.RoundTripper
	// Converters makes the definitions' converters (custom.NewConverters,
	// with the admission webhooks' resolvers, so that a conversion webhook
	// given as a service reference is reached as an admission webhook
	// is); nil: kube's defaults.
	Converters *conversion.CRConverterFactory
	Log        *slog.Logger
}

// Controller follows the definitions and runs their controllers. Create
// it with New; Run blocks.
type Controller struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client

	mu   sync.Mutex
	crds map[string]*apiextensionsv1.CustomResourceDefinition
	// broken holds why a definition with accepted names cannot be
	// served (serve).
	broken map[string]error
	// applied is the revision up to which every definition change is in
	// the registry.
	applied events.Revision
	synced  chan struct{}

	queue *queue
}

// New builds a Controller.
func New(cfg Config) (*Controller, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Converters == nil {
		var err error
		if cfg.Converters, err = custom.NewConverters(nil, nil); err != nil {
			return nil, err
		}
	}
	c := &Controller{cfg: cfg, log: cfg.Log, crds: map[string]*apiextensionsv1.CustomResourceDefinition{}, broken: map[string]error{},
		synced: make(chan struct{}), queue: newQueue()}
	if cfg.Loopback != nil {
		c.client = &http.Client{Transport: cfg.Loopback, Timeout: 30 * time.Second}
	}
	return c, nil
}

// Run follows the definitions until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.client != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(ctx)
		}()
	}
	for {
		err := c.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.log.Warn("crds: following definitions, starting over", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// WaitSynced returns once the definitions stored when Run started are
// served, or ctx is done.
func (c *Controller) WaitSynced(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Sync returns once the registry reflects every definition committed
// before the call (at most a few seconds; an error otherwise).
func (c *Controller) Sync(ctx context.Context) error {
	head, err := c.cfg.Store.Head(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		c.mu.Lock()
		done := c.applied >= head
		c.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crds: sync to revision %d: %w", head, ctx.Err())
		case <-t.C:
		}
	}
}

// follow lists, then tails the log until the watch ends.
func (c *Controller) follow(ctx context.Context) error {
	prefix := storage.Key(group, resource, "", "")
	list, err := c.cfg.Store.List(ctx, prefix, storage.ListOptions{})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, kv := range list.Items {
		crd, err := decode(kv.Value)
		if err != nil {
			c.log.Warn("crds: undecodable definition", "key", kv.Key, "err", err)
			continue
		}
		crd.ResourceVersion = kv.Revision.String()
		seen[crd.Name] = true
		c.apply(crd)
	}
	c.mu.Lock()
	var gone []string
	for name := range c.crds {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	c.mu.Unlock()
	for _, name := range gone {
		c.remove(name)
	}
	c.setApplied(list.Revision)
	select {
	case <-c.synced:
	default:
		close(c.synced)
	}
	w, err := c.cfg.Hub.Watch(ctx, watchhub.Request{Group: group, Resource: resource, From: list.Revision})
	if err != nil {
		return err
	}
	defer w.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			c.setApplied(w.Progress())
		case ev, ok := <-w.Events():
			if !ok {
				if err := w.Err(); err != nil {
					return err
				}
				return errors.New("crds: watch ended")
			}
			if ev.Type == events.Deleted {
				c.remove(ev.Name)
			} else if crd, err := decode(ev.Object); err != nil {
				c.log.Warn("crds: undecodable definition", "name", ev.Name, "err", err)
			} else {
				c.apply(crd)
			}
			c.setApplied(ev.Revision)
		}
	}
}

func (c *Controller) setApplied(rev events.Revision) {
	c.mu.Lock()
	if rev > c.applied {
		c.applied = rev
	}
	c.mu.Unlock()
}

func decode(raw []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := codec.Unmarshal(raw, crd); err != nil {
		return nil, err
	}
	return crd, nil
}

// apply serves crd's kinds if it is established, and queues it for the
// controllers.
func (c *Controller) apply(crd *apiextensionsv1.CustomResourceDefinition) {
	c.mu.Lock()
	c.crds[crd.Name] = crd
	c.mu.Unlock()
	c.serve(crd)
	c.queue.add(crd.Name)
}

// serve makes the registry serve crd's kinds, or none if it is not
// established. kube's handler also takes requests for a definition whose
// names are accepted but which is not established yet; cairn establishes
// in the same status write that accepts the names, so such a definition
// is one whose conversion webhook caBundle is invalid: its requests fail
// as kube's do, on the converter (Unservable).
func (c *Controller) serve(crd *apiextensionsv1.CustomResourceDefinition) {
	var rs []*schemas.Resource
	var broken error
	switch {
	case apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established):
		var err error
		if rs, err = custom.Build(crd, c.cfg.Converters); err != nil {
			c.log.Warn("crds: cannot serve definition", "name", crd.Name, "err", err)
			rs, broken = nil, err
		}
	case apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted):
		if _, err := custom.Build(crd, c.cfg.Converters); err != nil {
			broken = err
		}
	}
	c.mu.Lock()
	if broken != nil {
		c.broken[crd.Name] = broken
	} else {
		delete(c.broken, crd.Name)
	}
	c.mu.Unlock()
	c.cfg.Registry.SetCustom(crd.Name, rs)
}

// Unservable is why the definition whose accepted names serve resource in
// group, in a version it serves, cannot be served (its converter cannot be made, as a caBundle
// that is not PEM), or nil if there is none such. kube's CRD handler
// answers such a request with an internal error "error resolving
// resource".
func (c *Controller) Unservable(group, version, resource string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, err := range c.broken {
		crd := c.crds[name]
		if crd != nil && crd.Spec.Group == group && crd.Status.AcceptedNames.Plural == resource && apihelpers.HasServedCRDVersion(crd, version) {
			return err
		}
	}
	return nil
}

// remove stops serving a deleted definition; the others of its group may
// now take the names it held.
func (c *Controller) remove(name string) {
	c.mu.Lock()
	old := c.crds[name]
	delete(c.crds, name)
	delete(c.broken, name)
	var requeue []string
	if old != nil {
		for n, other := range c.crds {
			if other.Spec.Group == old.Spec.Group {
				requeue = append(requeue, n)
			}
		}
	}
	c.mu.Unlock()
	c.cfg.Registry.SetCustom(name, nil)
	for _, n := range requeue {
		c.queue.add(n)
	}
}

// get is the latest copy of a definition.
func (c *Controller) get(name string) (*apiextensionsv1.CustomResourceDefinition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	crd, ok := c.crds[name]
	if !ok {
		return nil, false
	}
	return crd.DeepCopy(), true
}

// groupNames are the accepted names of the group's definitions, as kube's
// naming controller collects them.
func (c *Controller) groupNames(grp string) (resources, kinds map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resources, kinds = map[string]bool{}, map[string]bool{}
	for _, crd := range c.crds {
		if crd.Spec.Group != grp {
			continue
		}
		n := crd.Status.AcceptedNames
		resources[n.Plural], resources[n.Singular] = true, true
		for _, s := range n.ShortNames {
			resources[s] = true
		}
		kinds[n.Kind], kinds[n.ListKind] = true, true
	}
	return resources, kinds
}

// jsonBody is v as a request body.
func jsonBody(v any) ([]byte, error) { return json.Marshal(v) }
