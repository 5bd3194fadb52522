package controlplane

import (
	"context"
	"fmt"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fcmetrics "k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/schemas"
)

// API Priority and Fairness: k8s.io/apiserver's config controller reads
// the FlowSchemas and PriorityLevelConfigurations through the streaming
// loopback client and drives the apiserver's APF filter
// (apiserver.Config.FlowControl). At start the control plane ensures
// kube's mandatory and suggested objects, as kube-apiserver's
// priority-and-fairness-config-producer does, and their Dangling status
// conditions, so that the controller has nothing left to write: Start
// returns only once every FlowSchema's condition is what the controller
// wants, and no write follows later without a change to cause it.

// DefaultMaxRequestsInFlight is kube-apiserver's server concurrency limit
// (--max-requests-inflight 400 plus --max-mutating-requests-inflight 200).
const DefaultMaxRequestsInFlight = 600

type flowControl struct {
	ctl     utilflowcontrol.Interface
	factory informers.SharedInformerFactory
}

func newFlowControl(lb *loopback, limit int) (*flowControl, error) {
	if limit <= 0 {
		limit = DefaultMaxRequestsInFlight
	}
	fcmetrics.Register()
	cs, err := kubernetes.NewForConfig(lb.streamConfig("cairn-priority-and-fairness"))
	if err != nil {
		return nil, fmt.Errorf("controlplane: flow control client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	return &flowControl{ctl: utilflowcontrol.New(factory, cs.FlowcontrolV1(), limit), factory: factory}, nil
}

// start ensures the bootstrap configuration, runs the config controller
// and returns once the FlowSchemas' status is settled; lb serves.
func (f *flowControl) start(ctx context.Context, cp *ControlPlane, lb *loopback) error {
	cs, err := kubernetes.NewForConfig(lb.config())
	if err != nil {
		return fmt.Errorf("controlplane: loopback client: %w", err)
	}
	if err := ensureFlowControl(ctx, cs, cp.Registry); err != nil {
		return err
	}
	cp.goRun("priority and fairness", func(ctx context.Context) error {
		f.factory.Start(ctx.Done())
		defer f.factory.Shutdown()
		if err := f.ctl.Run(ctx.Done()); err != nil && ctx.Err() == nil {
			return fmt.Errorf("controlplane: priority and fairness: %w", err)
		}
		return nil
	})
	return waitFlowSchemasSettled(ctx, cs)
}

// ensureFlowControl creates the missing mandatory and suggested objects
// and puts back the spec of those that auto-update (kube's ensurer: a
// mandatory object unless its apf.kubernetes.io/autoupdate-spec is
// "false", a suggested one only if it is "true"), then sets each
// FlowSchema's Dangling condition as the config controller would.
func ensureFlowControl(ctx context.Context, cs kubernetes.Interface, reg *schemas.Registry) error {
	plRes, _ := reg.ByKind(flowcontrolv1.SchemeGroupVersion.WithKind("PriorityLevelConfiguration"))
	fsRes, _ := reg.ByKind(flowcontrolv1.SchemeGroupVersion.WithKind("FlowSchema"))
	pls := cs.FlowcontrolV1().PriorityLevelConfigurations()
	for i, want := range append(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations...) {
		mandatory := i < len(bootstrap.MandatoryPriorityLevelConfigurations)
		want = want.DeepCopy()
		plRes.Default(want)
		have, err := pls.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = pls.Create(ctx, want, metav1.CreateOptions{FieldManager: "api-priority-and-fairness-config-producer-v1"})
		case err == nil && autoUpdate(have.Annotations, mandatory) && !apiequality.Semantic.DeepEqual(have.Spec, want.Spec):
			have.Spec = want.Spec
			_, err = pls.Update(ctx, have, metav1.UpdateOptions{FieldManager: "api-priority-and-fairness-config-producer-v1"})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("controlplane: priority level %s: %w", want.Name, err)
		}
	}
	fss := cs.FlowcontrolV1().FlowSchemas()
	for i, want := range append(bootstrap.MandatoryFlowSchemas, bootstrap.SuggestedFlowSchemas...) {
		mandatory := i < len(bootstrap.MandatoryFlowSchemas)
		want = want.DeepCopy()
		fsRes.Default(want)
		have, err := fss.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = fss.Create(ctx, want, metav1.CreateOptions{FieldManager: "api-priority-and-fairness-config-producer-v1"})
		case err == nil && autoUpdate(have.Annotations, mandatory) && !apiequality.Semantic.DeepEqual(have.Spec, want.Spec):
			have.Spec = want.Spec
			_, err = fss.Update(ctx, have, metav1.UpdateOptions{FieldManager: "api-priority-and-fairness-config-producer-v1"})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("controlplane: flow schema %s: %w", want.Name, err)
		}
	}
	return settleFlowSchemas(ctx, cs)
}

func autoUpdate(annotations map[string]string, mandatory bool) bool {
	v, ok := annotations[flowcontrolv1.AutoUpdateAnnotationKey]
	if mandatory {
		return !ok || v != "false"
	}
	return v == "true"
}

// settleFlowSchemas writes the Dangling condition of every FlowSchema
// whose condition is not the one the config controller computes
// (presyncFlowSchemaStatus), so that the controller finds nothing to do.
func settleFlowSchemas(ctx context.Context, cs kubernetes.Interface) error {
	fss, pls, err := listFlowControl(ctx, cs)
	if err != nil {
		return err
	}
	for i := range fss.Items {
		fs := &fss.Items[i]
		want := danglingCondition(fs, pls)
		if c := findDangling(fs); c != nil && sameCondition(*c, want) {
			continue
		}
		want.LastTransitionTime = metav1.NewTime(time.Now())
		conds := []flowcontrolv1.FlowSchemaCondition{want}
		for _, c := range fs.Status.Conditions {
			if c.Type != flowcontrolv1.FlowSchemaConditionDangling {
				conds = append(conds, c)
			}
		}
		fs.Status.Conditions = conds
		if _, err := cs.FlowcontrolV1().FlowSchemas().UpdateStatus(ctx, fs, metav1.UpdateOptions{FieldManager: utilflowcontrol.ConfigConsumerAsFieldManager}); err != nil &&
			!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("controlplane: flow schema %s status: %w", fs.Name, err)
		}
	}
	return nil
}

// waitFlowSchemasSettled waits until every FlowSchema's Dangling
// condition is the controller's (another apiserver's controller or a
// concurrent change may have moved it meanwhile).
func waitFlowSchemasSettled(ctx context.Context, cs kubernetes.Interface) error {
	for {
		fss, pls, err := listFlowControl(ctx, cs)
		if err != nil {
			return err
		}
		settled := true
		for i := range fss.Items {
			if c := findDangling(&fss.Items[i]); c == nil || !sameCondition(*c, danglingCondition(&fss.Items[i], pls)) {
				settled = false
			}
		}
		if settled {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controlplane: waiting for the flow schemas' status: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func listFlowControl(ctx context.Context, cs kubernetes.Interface) (*flowcontrolv1.FlowSchemaList, map[string]bool, error) {
	fss, err := cs.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("controlplane: flow schemas: %w", err)
	}
	plList, err := cs.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("controlplane: priority levels: %w", err)
	}
	pls := map[string]bool{}
	for _, pl := range plList.Items {
		pls[pl.Name] = true
	}
	return fss, pls, nil
}

func findDangling(fs *flowcontrolv1.FlowSchema) *flowcontrolv1.FlowSchemaCondition {
	for i, c := range fs.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			return &fs.Status.Conditions[i]
		}
	}
	return nil
}

// danglingCondition is the condition k8s.io/apiserver's config controller
// wants on fs (its presyncFlowSchemaStatus), without the time.
func danglingCondition(fs *flowcontrolv1.FlowSchema, pls map[string]bool) flowcontrolv1.FlowSchemaCondition {
	name := fs.Spec.PriorityLevelConfiguration.Name
	if pls[name] {
		return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse, Reason: "Found",
			Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q and it exists", name)}
	}
	return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionTrue, Reason: "NotFound",
		Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q but there is no such object", name)}
}

func sameCondition(a, b flowcontrolv1.FlowSchemaCondition) bool {
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

// controller is the filter's controller, nil when APF is off.
func (f *flowControl) controller() utilflowcontrol.Interface {
	if f == nil {
		return nil
	}
	return f.ctl
}
