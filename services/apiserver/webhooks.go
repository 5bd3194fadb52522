package apiserver

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/webhook"
)

// Admission webhooks (Config.Webhooks, package webhook) run where
// kube-apiserver runs its MutatingAdmissionWebhook and
// ValidatingAdmissionWebhook plugins: the mutating ones after the
// built-in mutation (mutate), before the strategy and validation; the
// validating ones after validation, just before the write. The server's
// own bindings and finalizes (trusted subresources) do not go through
// them. What they did is kept on the request (q.admission): their
// warnings go to the client as Warning headers, the webhooks that changed
// the object and their audit annotations into the event of the write
// (events.WriteMeta.Admission).

// webhookRequest is the dispatcher's view of an admission request.
func (s *Server) webhookRequest(q *request, a *AdmissionRequest) *webhook.Request {
	r := &webhook.Request{Resource: a.Resource.GVR(), Subresource: a.Subresource, Kind: a.Resource.GVK(),
		Operation: admission.Operation(a.Operation), Namespace: a.Namespace, Name: a.Name, DryRun: a.DryRun,
		User: userInfo(a.User), New: func() runtime.Object { return a.Resource.New() }}
	if a.Object != nil {
		r.Object = a.Object
	}
	if a.OldObject != nil {
		r.OldObject = a.OldObject
	}
	if d := a.Resource.Default; d != nil {
		r.Default = func(o runtime.Object) { d(o.(schemas.Object)) }
	}
	query := q.r.URL.Query()
	opts := metav1.TypeMeta{APIVersion: "meta.k8s.io/v1"}
	switch a.Operation {
	case "CREATE":
		opts.Kind = "CreateOptions"
		r.Options = &metav1.CreateOptions{TypeMeta: opts, DryRun: query["dryRun"], FieldManager: query.Get("fieldManager")}
	case "UPDATE":
		opts.Kind = "UpdateOptions"
		r.Options = &metav1.UpdateOptions{TypeMeta: opts, DryRun: query["dryRun"], FieldManager: query.Get("fieldManager")}
	case "DELETE":
		opts.Kind = "DeleteOptions"
		r.Options = &metav1.DeleteOptions{TypeMeta: opts, DryRun: query["dryRun"]}
	}
	return r
}

func (s *Server) callsWebhooks(a *AdmissionRequest, mutating bool) bool {
	return s.cfg.Webhooks != nil && s.cfg.Webhooks.HasWebhooks(mutating) &&
		a.Subresource != "binding" && a.Subresource != "finalize"
}

// mutateWebhooks runs the mutating webhooks on a.Object (replaced by
// what they leave); a reinvocation runs the built-in mutation again.
func (s *Server) mutateWebhooks(q *request, a *AdmissionRequest) error {
	if !s.callsWebhooks(a, true) {
		return nil
	}
	rec := s.admissionRecord(q)
	out, err := s.cfg.Webhooks.Mutate(q.ctx(), s.webhookRequest(q, a), rec, func(o runtime.Object) error {
		a.Object = o.(schemas.Object)
		return s.mutate(a)
	})
	s.writeWarnings(q, rec)
	if err != nil {
		return err
	}
	if o, ok := out.(schemas.Object); ok {
		a.Object = o
	}
	return nil
}

// validateWebhooks runs the ValidatingAdmissionPolicies, then the
// validating webhooks, on the validated object (kube's plugin order).
func (s *Server) validateWebhooks(q *request, a *AdmissionRequest) error {
	if s.cfg.Policies != nil && a.Subresource != "binding" && a.Subresource != "finalize" {
		rec := s.admissionRecord(q)
		err := s.cfg.Policies.Validate(q.ctx(), s.webhookRequest(q, a), rec)
		s.writeWarnings(q, rec)
		if err != nil {
			return err
		}
	}
	if !s.callsWebhooks(a, false) {
		return nil
	}
	rec := s.admissionRecord(q)
	err := s.cfg.Webhooks.Validate(q.ctx(), s.webhookRequest(q, a), rec)
	s.writeWarnings(q, rec)
	return err
}

// admissionRecord is the request's record of what webhooks did, shared
// by its mutating and validating calls.
func (s *Server) admissionRecord(q *request) *webhook.Record {
	if q.admission == nil {
		q.admission = &webhook.Record{}
	}
	return q.admission
}

// writeWarnings sends each warning once, as kube's warning recorder
// does: `Warning: 299 - "text"`.
func (s *Server) writeWarnings(q *request, rec *webhook.Record) {
	h := q.w.Header()
	for _, w := range rec.Warnings {
		v, err := utilnet.NewWarningHeader(299, "-", w)
		if err != nil || slices.Contains(h.Values("Warning"), v) {
			continue
		}
		h.Add("Warning", v)
	}
}

// admissionMeta is the record for the event of the write, nil if no
// webhook changed or annotated it.
func admissionMeta(rec *webhook.Record) *events.Admission {
	if rec == nil || len(rec.Mutated) == 0 && len(rec.Annotations) == 0 {
		return nil
	}
	return &events.Admission{MutatedBy: slices.Clone(rec.Mutated), Annotations: rec.Annotations}
}

// CELAuthorizer is the `authorizer` variable of webhook matchConditions
// on a's decisions.
func CELAuthorizer(a Authorizer) authorizer.UnconditionalAuthorizer { return celAuthorizer{a} }

type celAuthorizer struct{ a Authorizer }

func (c celAuthorizer) Authorize(ctx context.Context, at authorizer.Attributes) (authorizer.Decision, string, error) {
	u := at.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "no user", nil
	}
	attrs := Attributes{User: User{User: u.GetName(), Groups: u.GetGroups()}, Verb: at.GetVerb(), Path: at.GetPath()}
	if at.IsResourceRequest() {
		attrs = Attributes{User: attrs.User, Verb: at.GetVerb(), APIGroup: at.GetAPIGroup(), Resource: at.GetResource(),
			Subresource: at.GetSubresource(), Namespace: at.GetNamespace(), Name: at.GetName()}
	}
	if ok, reason := c.a.Authorize(ctx, attrs); ok {
		return authorizer.DecisionAllow, reason, nil
	} else {
		return authorizer.DecisionNoOpinion, reason, nil
	}
}
