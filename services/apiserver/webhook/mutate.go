package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	kwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook"
	webhookerrors "k8s.io/apiserver/pkg/admission/plugin/webhook/errors"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/generic"
	webhookrequest "k8s.io/apiserver/pkg/admission/plugin/webhook/request"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"

	"github.com/cairn-dev/cairn/schemas/codec"
)

// Audit annotation key prefixes of kube's mutating dispatcher.
const (
	MutationAnnotationPrefix   = "mutation.webhook.admission.k8s.io/"
	failedOpenAnnotationPrefix = "failed-open."
)

// Mutate calls the mutating webhooks that match r, in order, each on the
// object the previous ones left, and returns that object (r.Object itself
// when none changed it). As kube's reinvocation does, if a webhook
// changed the object and a webhook with reinvocationPolicy IfNeeded ran
// before that change, builtin (the built-in mutating admission) runs
// again and then those webhooks once more. A webhook that refuses, or
// that cannot be called under failurePolicy Fail, stops the write with
// kube's error.
func (d *Dispatcher) Mutate(ctx context.Context, r *Request, rec *Record, builtin func(runtime.Object) error) (runtime.Object, error) {
	hooks := d.configs.hooks().mutating
	if len(hooks) == 0 {
		return r.Object, nil
	}
	attr := attributes(r)
	if exempt(attr) {
		return r.Object, nil
	}
	rc := &reinvocation{}
	reinvoke, err := d.mutateRound(ctx, r, attr, hooks, rc, 0, rec)
	if err != nil {
		return nil, err
	}
	if reinvoke {
		if builtin != nil {
			if err := builtin(attr.VersionedObject.Object()); err != nil {
				return nil, err
			}
		}
		if _, err := d.mutateRound(ctx, r, attr, hooks, rc, 1, rec); err != nil {
			return nil, err
		}
	}
	return attr.VersionedObject.Object(), nil
}

// reinvocation is kube's webhookReinvokeContext.
type reinvocation struct {
	last                  runtime.Object
	previouslyReinvocable sets.Set[string]
	reinvoke              sets.Set[string]
}

func (rc *reinvocation) requireReinvokingPrevious() {
	if len(rc.previouslyReinvocable) == 0 {
		return
	}
	if rc.reinvoke == nil {
		rc.reinvoke = sets.New[string]()
	}
	rc.reinvoke = rc.reinvoke.Union(rc.previouslyReinvocable)
	rc.previouslyReinvocable = sets.New[string]()
}

// mutateRound is one pass of kube's mutatingDispatcher.Dispatch; it
// reports whether a webhook changed the object.
func (d *Dispatcher) mutateRound(ctx context.Context, r *Request, attr *admission.VersionedAttributes, hooks []kwebhook.WebhookAccessor,
	rc *reinvocation, round int, rec *Record) (bool, error) {
	if round > 0 && !apiequality.Semantic.DeepEqual(rc.last, attr.VersionedObject.Object()) {
		rc.requireReinvokingPrevious()
	}
	defer func() {
		if o := attr.VersionedObject.Object(); o != nil {
			rc.last = o.DeepCopyObject()
		}
	}()
	shouldReinvoke := false
	for i, h := range hooks {
		inv, statusErr := d.shouldCall(ctx, h, attr)
		if statusErr != nil {
			return false, statusErr
		}
		if inv == nil {
			continue
		}
		mh, _ := inv.Webhook.GetMutatingWebhook()
		if round > 0 && !rc.reinvoke.Has(h.GetUID()) {
			continue
		}
		changed, err := d.callMutating(ctx, r, mh, inv, attr, rec)
		rec.annotate(fmt.Sprintf("%sround_%d_index_%d", MutationAnnotationPrefix, round, i),
			mutationAnnotation(h.GetConfigurationName(), mh.Name, changed))
		if changed {
			rec.mutated(mh.Name)
			rc.requireReinvokingPrevious()
			shouldReinvoke = true
		}
		if mh.ReinvocationPolicy != nil && *mh.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy {
			if rc.previouslyReinvocable == nil {
				rc.previouslyReinvocable = sets.New[string]()
			}
			rc.previouslyReinvocable.Insert(h.GetUID())
		}
		if err == nil {
			continue
		}
		key := fmt.Sprintf("%s%sround_%d_index_%d", failedOpenAnnotationPrefix, MutationAnnotationPrefix, round, i)
		if err := d.callErr(h, err, rec, key); err != nil {
			return false, err
		}
		if ctx.Err() != nil {
			return false, apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
		}
	}
	return shouldReinvoke && round == 0, nil
}

func mutationAnnotation(config, hook string, mutated bool) string {
	b, _ := json.Marshal(struct {
		Configuration string `json:"configuration"`
		Webhook       string `json:"webhook"`
		Mutated       bool   `json:"mutated"`
	}{config, hook, mutated})
	return string(b)
}

// checkDryRun is kube's refusal to call a webhook with side effects on a
// dry run.
func checkDryRun(attr admission.Attributes, name string, se *admissionregistrationv1.SideEffectClass) error {
	if !attr.IsDryRun() {
		return nil
	}
	if se == nil {
		return &webhookutil.ErrCallingWebhook{WebhookName: name, Reason: fmt.Errorf("Webhook SideEffects is nil"),
			Status: apierrors.NewBadRequest("Webhook SideEffects is nil")}
	}
	if *se != admissionregistrationv1.SideEffectClassNone && *se != admissionregistrationv1.SideEffectClassNoneOnDryRun {
		return webhookerrors.NewDryRunUnsupportedErr(name)
	}
	return nil
}

// call posts the AdmissionReview to the webhook within its timeout and
// verifies the answer, as both dispatchers do; warnings and audit
// annotations go to rec.
func (d *Dispatcher) call(ctx context.Context, h kwebhook.WebhookAccessor, name string, timeout *int32, mutating bool,
	inv *generic.WebhookInvocation, attr *admission.VersionedAttributes, rec *Record) (*webhookrequest.AdmissionResponse, error) {
	uid, request, response, err := webhookrequest.CreateAdmissionObjects(attr, inv)
	if err != nil {
		return nil, &webhookutil.ErrCallingWebhook{WebhookName: name, Reason: fmt.Errorf("could not create admission objects: %w", err),
			Status: apierrors.NewBadRequest("error creating admission objects")}
	}
	client, err := h.GetRESTClient(d.clients)
	if err != nil {
		return nil, &webhookutil.ErrCallingWebhook{WebhookName: name, Reason: fmt.Errorf("could not get REST client: %w", err),
			Status: apierrors.NewInternalError(err)}
	}
	if timeout != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*timeout)*time.Second)
		defer cancel()
	}
	req := client.Post().Body(request)
	if deadline, ok := ctx.Deadline(); ok {
		if t := time.Until(deadline); t > 0 {
			if tr := t.Truncate(time.Second); tr != t {
				t = tr + time.Second
			}
			req.Timeout(t)
		}
	}
	if err := req.Do(ctx).Into(response); err != nil {
		status, ok := err.(*apierrors.StatusError)
		if !ok {
			status = apierrors.NewServiceUnavailable("error calling webhook")
		}
		return nil, &webhookutil.ErrCallingWebhook{WebhookName: name, Reason: fmt.Errorf("failed to call webhook: %w", err), Status: status}
	}
	result, err := webhookrequest.VerifyAdmissionResponse(uid, mutating, response)
	if err != nil {
		return nil, &webhookutil.ErrCallingWebhook{WebhookName: name, Reason: fmt.Errorf("received invalid webhook response: %w", err),
			Status: apierrors.NewServiceUnavailable("error validating webhook response")}
	}
	for k, v := range result.AuditAnnotations {
		rec.annotate(name+"/"+k, v)
	}
	for _, w := range result.Warnings {
		rec.warn(w)
	}
	if !result.Allowed {
		return nil, &webhookutil.ErrWebhookRejection{Status: webhookerrors.ToStatusErr(name, result.Result)}
	}
	return result, nil
}

// callMutating is kube's callAttrMutatingHook: call, then apply the
// JSONPatch to the object, decode it into a fresh object of the kind and
// default it. It reports whether the object changed.
func (d *Dispatcher) callMutating(ctx context.Context, r *Request, h *admissionregistrationv1.MutatingWebhook, inv *generic.WebhookInvocation,
	attr *admission.VersionedAttributes, rec *Record) (bool, error) {
	if err := checkDryRun(attr, h.Name, h.SideEffects); err != nil {
		return false, err
	}
	result, err := d.call(ctx, inv.Webhook, h.Name, h.TimeoutSeconds, true, inv, attr, rec)
	if err != nil {
		return false, err
	}
	if len(result.Patch) == 0 {
		return false, nil
	}
	patch, err := jsonpatch.DecodePatch(result.Patch)
	if err != nil {
		return false, &webhookutil.ErrCallingWebhook{WebhookName: h.Name, Reason: fmt.Errorf("received undecodable patch in webhook response: %w", err),
			Status: apierrors.NewServiceUnavailable("error decoding patch in webhook response")}
	}
	if len(patch) == 0 {
		return false, nil
	}
	cur := attr.VersionedObject.Object()
	if cur == nil {
		return false, apierrors.NewInternalError(fmt.Errorf("admission webhook %q attempted to modify the object, which is not supported for this operation", h.Name))
	}
	if result.PatchType != admissionv1.PatchTypeJSONPatch {
		return false, &webhookutil.ErrCallingWebhook{WebhookName: h.Name, Reason: fmt.Errorf("unsupported patch type %q", result.PatchType),
			Status: webhookerrors.ToStatusErr(h.Name, result.Result)}
	}
	js, err := json.Marshal(cur)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	patched, err := patch.Apply(js)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	next := r.New()
	if err := codec.Unmarshal(patched, next); err != nil {
		return false, apierrors.NewInternalError(err)
	}
	if next.GetObjectKind().GroupVersionKind() != r.Kind {
		return false, apierrors.NewInternalError(fmt.Errorf("admission webhook %q changed the kind of the object to %v", h.Name,
			next.GetObjectKind().GroupVersionKind()))
	}
	changed := !apiequality.Semantic.DeepEqual(cur, next)
	attr.UpdateObject(next)
	if r.Default != nil {
		r.Default(next)
	}
	return changed, nil
}
