package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	kwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/generic"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
)

// Config is what a Dispatcher needs. Store and Hub are required.
type Config struct {
	Store *storage.Store
	Hub   *watchhub.Hub
	// Authorizer is the `authorizer` variable of matchConditions; nil
	// denies every check.
	Authorizer authorizer.UnconditionalAuthorizer
	// NodeNetNS names the network namespace a node's pods are reachable
	// in (the node's netns path), for webhooks given as a service
	// reference; nil, or a node it does not know, makes such a webhook
	// fail to be called (its failurePolicy decides).
	NodeNetNS func(node string) (path string, ok bool)
	Log       *slog.Logger
}

// Dispatcher calls the admission webhooks of the cluster's
// MutatingWebhookConfigurations and ValidatingWebhookConfigurations as
// kube-apiserver's MutatingAdmissionWebhook and ValidatingAdmissionWebhook
// plugins do. It decides from caches (Run): no etcd read on the request
// path but for a namespace the cache does not hold yet. Safe for
// concurrent use.
type Dispatcher struct {
	cfg        Config
	configs    *configurations
	namespaces *objects[corev1.Namespace]
	services   *objects[corev1.Service]
	slices     *objects[discoveryv1.EndpointSlice]
	clients    *webhookutil.ClientManager
	resolver   *resolver
	filter     cel.ConditionCompiler

	synced   chan struct{}
	syncWG   sync.WaitGroup
	syncOnce sync.Once
}

// New builds a Dispatcher; its caches fill once Run runs.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Store == nil || cfg.Hub == nil {
		return nil, errors.New("webhook: Store and Hub are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Authorizer == nil {
		cfg.Authorizer = denyAll{}
	}
	d := &Dispatcher{cfg: cfg, configs: newConfigurations(), namespaces: newObjects[corev1.Namespace](),
		services: newObjects[corev1.Service](), slices: newObjects[discoveryv1.EndpointSlice](),
		filter: cel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())),
		synced: make(chan struct{})}
	d.resolver = &resolver{d: d, nodes: map[string]string{}}
	cm, err := newClientManager(d.resolver)
	if err != nil {
		return nil, err
	}
	d.clients = cm
	return d, nil
}

type denyAll struct{}

func (denyAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "", nil
}

// Run fills the caches (webhook configurations, namespaces, Services,
// EndpointSlices) and follows the log until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	mirrors := []*mirror{
		{group: admissionregistrationv1.GroupName, resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
			load: d.configs.load, apply: d.configs.apply},
		{resources: []string{"namespaces"}, load: loadOne(func(v [][]byte) { d.namespaces.load(v, nsKey) }),
			apply: func(_ string, t events.Type, raw []byte) error { return d.namespaces.apply(t, raw, nsKey) }},
		{resources: []string{"services"}, load: loadOne(func(v [][]byte) { d.services.load(v, svcKey) }),
			apply: func(_ string, t events.Type, raw []byte) error { return d.services.apply(t, raw, svcKey) }},
		{group: discoveryv1.GroupName, resources: []string{"endpointslices"}, load: loadOne(func(v [][]byte) { d.slices.load(v, sliceKey) }),
			apply: func(_ string, t events.Type, raw []byte) error { return d.slices.apply(t, raw, sliceKey) }},
	}
	var wg sync.WaitGroup
	d.syncWG.Add(len(mirrors))
	go func() {
		d.syncWG.Wait()
		close(d.synced)
	}()
	for _, m := range mirrors {
		m.store, m.hub, m.log = d.cfg.Store, d.cfg.Hub, d.cfg.Log
		var once sync.Once
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.run(ctx, func() { once.Do(d.syncWG.Done) })
		}()
	}
	wg.Wait()
	return nil
}

// WaitForSync blocks until every cache holds its first snapshot.
func (d *Dispatcher) WaitForSync(ctx context.Context) error {
	select {
	case <-d.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("webhook: wait for the caches: %w", ctx.Err())
	}
}

// Request is one write as admission sees it.
type Request struct {
	Resource    schema.GroupVersionResource
	Subresource string
	Kind        schema.GroupVersionKind
	// Operation is CREATE, UPDATE, DELETE or CONNECT.
	Operation admission.Operation
	Namespace string
	Name      string
	// Object is the object being written (nil for DELETE); OldObject the
	// stored one (nil for CREATE).
	Object, OldObject runtime.Object
	// Options are the request's options (CreateOptions, UpdateOptions,
	// DeleteOptions), sent to webhooks as request.options.
	Options runtime.Object
	DryRun  bool
	User    user.Info
	// New makes an empty object of Kind, into which a patched object is
	// decoded; Default defaults it, as kube defaults after every patch.
	New     func() runtime.Object
	Default func(runtime.Object)
}

// Record is what the webhooks did to a request: the warnings for the
// client (Warning headers), the names of the mutating webhooks that
// changed the object in call order, and the audit annotations they and
// admission set (kube's keys: "<webhook name>/<key>" for a webhook's own
// auditAnnotations, "mutation.webhook.admission.k8s.io/round_R_index_I"
// for each mutating call). Safe for concurrent use.
type Record struct {
	mu          sync.Mutex
	Warnings    []string
	Mutated     []string
	Annotations map[string]string
}

func (r *Record) annotate(k, v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Annotations == nil {
		r.Annotations = map[string]string{}
	}
	if _, ok := r.Annotations[k]; !ok {
		r.Annotations[k] = v
	}
}

func (r *Record) warn(w string) {
	r.mu.Lock()
	r.Warnings = append(r.Warnings, w)
	r.mu.Unlock()
}

func (r *Record) mutated(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.Mutated {
		if n == name {
			return
		}
	}
	r.Mutated = append(r.Mutated, name)
}

// HasWebhooks reports whether any webhook configuration exists: the
// request path skips building admission attributes when none does.
func (d *Dispatcher) HasWebhooks(mutating bool) bool {
	s := d.configs.hooks()
	if mutating {
		return len(s.mutating) > 0
	}
	return len(s.validating) > 0
}

// attributes builds kube's admission attributes of r; the object is
// already in the version webhooks see (cairn serves one version of each
// resource).
func attributes(r *Request) *admission.VersionedAttributes {
	for _, o := range []runtime.Object{r.Object, r.OldObject} {
		if o != nil && o.GetObjectKind().GroupVersionKind().Empty() {
			o.GetObjectKind().SetGroupVersionKind(r.Kind)
		}
	}
	attr := admission.NewAttributesRecord(r.Object, r.OldObject, r.Kind, r.Namespace, r.Name, r.Resource, r.Subresource,
		r.Operation, r.Options, r.DryRun, r.User)
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: r.Kind}
	if r.Object != nil {
		va.VersionedObject.Set(r.Object)
	}
	if r.OldObject != nil {
		va.VersionedOldObject.Set(r.OldObject)
	}
	return va
}

// shouldCall is kube's Webhook.ShouldCallHook: the namespace selector,
// the object selector, the rules, then the matchConditions. cairn serves
// one version of each resource, so matchPolicy Equivalent finds no other
// resource to match.
func (d *Dispatcher) shouldCall(ctx context.Context, h kwebhook.WebhookAccessor, attr *admission.VersionedAttributes) (*generic.WebhookInvocation, *apierrors.StatusError) {
	matches, nsErr := d.matchNamespace(ctx, h, attr)
	if !matches && nsErr == nil {
		return nil, nil
	}
	matches, objErr := (&object.Matcher{}).MatchObjectSelector(h, attr)
	if !matches && objErr == nil {
		return nil, nil
	}
	var inv *generic.WebhookInvocation
	for _, r := range h.GetRules() {
		if (&rules.Matcher{Rule: r, Attr: attr}).Matches() {
			inv = &generic.WebhookInvocation{Webhook: h, Resource: attr.GetResource(), Subresource: attr.GetSubresource(), Kind: attr.GetKind()}
			break
		}
	}
	if inv == nil {
		return nil, nil
	}
	if nsErr != nil {
		return nil, nsErr
	}
	if objErr != nil {
		return nil, objErr
	}
	if len(h.GetMatchConditions()) > 0 {
		res := h.GetCompiledMatcher(d.filter).Match(ctx, attr, nil, d.cfg.Authorizer)
		if res.Error != nil {
			d.cfg.Log.Warn("failed evaluating match conditions, failing closed", "webhook", h.GetName(), "err", res.Error)
			return nil, apierrors.NewForbidden(attr.GetResource().GroupResource(), attr.GetName(), res.Error)
		}
		if !res.Matches {
			return nil, nil
		}
	}
	return inv, nil
}

// matchNamespace is kube's namespace.Matcher.MatchNamespaceSelector on
// the namespace cache.
func (d *Dispatcher) matchNamespace(ctx context.Context, h kwebhook.WebhookAccessor, attr admission.Attributes) (bool, *apierrors.StatusError) {
	if attr.GetNamespace() == "" && attr.GetResource().Resource != "namespaces" {
		return true, nil
	}
	sel, err := h.GetParsedNamespaceSelector()
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	if sel.Empty() {
		return true, nil
	}
	var own map[string]string
	if o := attr.GetObject(); o != nil {
		if a, err := meta.Accessor(o); err == nil {
			own = a.GetLabels()
		}
	}
	lbls, err := d.namespaceLabels(ctx, attr.GetResource(), attr.GetSubresource(), string(attr.GetOperation()), attr.GetNamespace(), own)
	if apierrors.IsNotFound(err) {
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			return false, &apierrors.StatusError{ErrStatus: st.Status()}
		}
	}
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	return sel.Matches(labels.Set(lbls)), nil
}

// exempt is kube's rule that webhooks are not called for writes of the
// admission configuration itself (so a broken webhook cannot lock out
// its own repair).
func exempt(attr admission.Attributes) bool {
	return rules.IsExemptAdmissionConfigurationResource(attr)
}

// callErr turns a failed call into the error kube returns for it under
// failurePolicy Fail, or nil (after recording the failure) under Ignore.
func (d *Dispatcher) callErr(h kwebhook.WebhookAccessor, err error, rec *Record, failedOpenKey string) error {
	var callErr *webhookutil.ErrCallingWebhook
	if errors.As(err, &callErr) {
		if fp := h.GetFailurePolicy(); fp != nil && *fp == admissionregistrationv1.Ignore {
			d.cfg.Log.Warn("failed calling webhook, failing open", "webhook", h.GetName(), "err", callErr)
			rec.annotate(failedOpenKey, h.GetName())
			return nil
		}
		d.cfg.Log.Warn("failed calling webhook, failing closed", "webhook", h.GetName(), "err", err)
		return apierrors.NewInternalError(err)
	}
	var rej *webhookutil.ErrWebhookRejection
	if errors.As(err, &rej) {
		return rej.Status
	}
	return err
}

// Attributes are kube's admission attributes of r, as the webhooks see
// them (also what the admission policies are evaluated on).
func (r *Request) Attributes() admission.Attributes { return attributes(r).Attributes }

// Warn adds a warning for the client (admission policies' Warn actions).
func (r *Record) Warn(w string) { r.warn(w) }

// Annotate adds an audit annotation (admission policies' own), keeping
// the first value of a key.
func (r *Record) Annotate(k, v string) { r.annotate(k, v) }
