package policystatus

import (
	"context"
	"fmt"
	"log/slog"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	applyv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/cairn-dev/cairn/events/consumer"
)

// Name is the controller's name in logs and metrics.
const Name = "validatingadmissionpolicy-status"

// FieldManager owns the status fields the controller applies (kube's
// controller name).
const FieldManager = "validatingadmissionpolicy-status-controller"

var policiesResource = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies")

// Options configure the controller.
type Options struct {
	// Workers is the number of policies checked at once; 0 means 5
	// (kube's --concurrent-validating-admission-policy-status-syncs).
	Workers int
}

// Controller is the ValidatingAdmissionPolicy status controller. Build it
// with New; its Manager runs it.
type Controller struct {
	log      *slog.Logger
	client   kubernetes.Interface
	policies *consumer.Cache[*admissionregistrationv1.ValidatingAdmissionPolicy]
	checker  *validating.TypeChecker
}

// New builds the controller on m's policy cache, client and discovery.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	policies, err := consumer.CacheFor[*admissionregistrationv1.ValidatingAdmissionPolicy](m, policiesResource)
	if err != nil {
		return nil, fmt.Errorf("policystatus: new: %w", err)
	}
	c := &Controller{
		log:      m.Log().With("controller", Name),
		client:   m.Client(),
		policies: policies,
		// The TypeChecker is safe for concurrent Checks: the mapper
		// locks, the resolver fetches the documents on each call.
		checker: &validating.TypeChecker{
			SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: m.Discovery()},
			RestMapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(m.Discovery())),
		},
	}
	ctrl, err := m.NewController(consumer.ControllerConfig{Name: Name, Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{policies}})
	if err != nil {
		return nil, fmt.Errorf("policystatus: new: %w", err)
	}
	consumer.For(policies, ctrl, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) []string {
		if !needsCheck(p) {
			return nil
		}
		return []string{p.Name}
	})
	return c, nil
}

var _ consumer.Reconciler = (*Controller)(nil)

// Reconcile type checks policy req.Key if its generation is not yet
// observed, and applies the result to its status (kube's reconcile).
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	p, ok := c.policies.Get("", req.Key)
	if !ok || !needsCheck(p) {
		return consumer.Result{}, nil
	}
	warnings := c.checker.Check(p)
	cfgs := make([]*applyv1.ExpressionWarningApplyConfiguration, 0, len(warnings))
	for _, w := range warnings {
		cfgs = append(cfgs, applyv1.ExpressionWarning().WithFieldRef(w.FieldRef).WithWarning(w.Warning))
	}
	apply := applyv1.ValidatingAdmissionPolicy(p.Name).WithStatus(applyv1.ValidatingAdmissionPolicyStatus().
		WithObservedGeneration(p.Generation).
		WithTypeChecking(applyv1.TypeChecking().WithExpressionWarnings(cfgs...)))
	_, err := c.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().ApplyStatus(ctx, apply,
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if apierrors.IsNotFound(err) {
		return consumer.Result{}, nil
	}
	if err != nil {
		return consumer.Result{}, fmt.Errorf("policystatus: apply status of %s: %w", p.Name, err)
	}
	c.log.Info("type checked policy", "key", p.Name, "generation", p.Generation, "warnings", len(warnings))
	return consumer.Result{}, nil
}

// needsCheck: the policy's generation is newer than its status says.
func needsCheck(p *admissionregistrationv1.ValidatingAdmissionPolicy) bool {
	return p.Generation > p.Status.ObservedGeneration
}
