// Package policy evaluates ValidatingAdmissionPolicies and their bindings
// with the plugin kube-apiserver runs, k8s.io/apiserver's
// admission/plugin/policy/validating, wired as kube-apiserver wires it:
// shared informers of policies, bindings and namespaces, a dynamic client
// for the param kinds (each watched by its own informer), a REST mapper
// from discovery and the cluster's authorizer for CEL's `authorizer`. All
// of it reaches the apiserver through its loopback client, so the
// policies take effect when their watch events arrive.
//
// The apiserver calls Validate where kube runs the plugin: after
// validation, before the validating webhooks. A refusal is the plugin's
// error ("ValidatingAdmissionPolicy 'P' with binding 'B' denied request:
// MESSAGE", with the validation's reason and code); Warn actions become
// the request's Warning headers; Audit actions and auditAnnotations go
// into the record of the write (events.WriteMeta.Admission).
package policy

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/cairn-dev/cairn/services/apiserver/webhook"
)

// Config of the policies.
type Config struct {
	// Scheme knows every served kind (schemas.Registry.Scheme).
	Scheme *runtime.Scheme
	// Authorizer answers CEL's authorizer checks.
	Authorizer authorizer.UnconditionalAuthorizer
	Log        *slog.Logger
}

// Policies evaluates the cluster's ValidatingAdmissionPolicies. Until
// Start, nothing is evaluated (the loopback client does not exist yet).
type Policies struct {
	cfg     Config
	oi      admission.ObjectInterfaces
	plugin  atomic.Pointer[validating.Plugin]
	started atomic.Bool
}

// New returns Policies that evaluate nothing until Start.
func New(cfg Config) *Policies {
	return &Policies{cfg: cfg, oi: admission.NewObjectInterfacesFromScheme(cfg.Scheme)}
}

// Start builds the plugin on loopback and starts its informers; they stop
// with ctx. It returns once the plugin is initialized; requests wait for
// its caches as kube's do ("not yet ready to handle request" after 10 s).
func (p *Policies) Start(ctx context.Context, loopback *rest.Config) error {
	if !p.started.CompareAndSwap(false, true) {
		return fmt.Errorf("policy: started twice")
	}
	cfg := rest.CopyConfig(loopback)
	cfg.UserAgent = "cairn-validating-admission-policy"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("policy: client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("policy: dynamic client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	plugin, err := validating.NewPlugin(nil)
	if err != nil {
		return fmt.Errorf("policy: plugin: %w", err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	plugin.SetExternalKubeInformerFactory(factory)
	plugin.SetExternalKubeClientSet(cs)
	plugin.SetDynamicClient(dyn)
	plugin.SetRESTMapper(mapper) // rediscovers on a miss (a new CRD as paramKind)
	plugin.SetUnconditionalAuthorizer(p.cfg.Authorizer)
	plugin.SetDrainedNotification(ctx.Done())
	if err := plugin.ValidateInitialization(); err != nil {
		return fmt.Errorf("policy: plugin: %w", err)
	}
	factory.Start(ctx.Done())
	p.plugin.Store(plugin)
	return nil
}

// Validate evaluates the policies bound to r. Warnings go to rec.
func (p *Policies) Validate(ctx context.Context, r *webhook.Request, rec *webhook.Record) error {
	plugin := p.plugin.Load()
	if plugin == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ctx = warning.WithWarningRecorder(audit.WithAuditContext(ctx), recorder{rec})
	// Annotations are kept up to their level: Metadata is every one (an
	// audit context set up by a caller keeps its own level).
	_ = audit.AuditContextFrom(ctx).Init(audit.RequestAuditConfig{Level: auditinternal.LevelMetadata}, nil)
	// WithAudit copies the plugin's annotations (auditAnnotations as
	// POLICY/KEY, Audit actions' validation.policy.admission.k8s.io/
	// validation_failure) into the audit context, as kube's chain does.
	err := admission.WithAudit(plugin).(admission.ValidationInterface).Validate(ctx, r.Attributes(), p.oi)
	for k, v := range audit.AuditContextFrom(ctx).GetEventAnnotations() {
		rec.Annotate(k, v)
	}
	return err
}

// recorder hands the plugin's warnings (Warn actions) to the record.
type recorder struct{ rec *webhook.Record }

func (w recorder) AddWarning(_, text string) {
	if strings.TrimSpace(text) != "" {
		w.rec.Warn(text)
	}
}
