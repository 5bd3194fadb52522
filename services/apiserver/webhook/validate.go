package webhook

import (
	"context"
	"fmt"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/generic"
)

const validatingFailedOpenPrefix = "failed-open.validating.webhook.admission.k8s.io/"

// Validate calls the validating webhooks that match r, all at once, as
// kube's validatingDispatcher does, and returns the first error of the
// ones that refused or (under failurePolicy Fail) could not be called.
// Validating webhooks cannot change the object.
func (d *Dispatcher) Validate(ctx context.Context, r *Request, rec *Record) error {
	hooks := d.configs.hooks().validating
	if len(hooks) == 0 {
		return nil
	}
	attr := attributes(r)
	if exempt(attr) {
		return nil
	}
	type call struct {
		inv   *generic.WebhookInvocation
		index int
	}
	var calls []call
	for i, h := range hooks {
		inv, statusErr := d.shouldCall(ctx, h, attr)
		if statusErr != nil {
			return statusErr
		}
		if inv != nil {
			calls = append(calls, call{inv, i})
		}
	}
	if len(calls) == 0 {
		return nil
	}
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for j, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, _ := c.inv.Webhook.GetValidatingWebhook()
			err := d.callValidating(ctx, h, c.inv, attr, rec)
			if err != nil {
				errs[j] = d.callErr(c.inv.Webhook, err, rec, fmt.Sprintf("%sround_0_index_%d", validatingFailedOpenPrefix, c.index))
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *Dispatcher) callValidating(ctx context.Context, h *admissionregistrationv1.ValidatingWebhook, inv *generic.WebhookInvocation,
	attr *admission.VersionedAttributes, rec *Record) error {
	if err := checkDryRun(attr, h.Name, h.SideEffects); err != nil {
		return err
	}
	_, err := d.call(ctx, inv.Webhook, h.Name, h.TimeoutSeconds, false, inv, attr, rec)
	return err
}
