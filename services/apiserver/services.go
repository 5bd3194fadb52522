package apiserver

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/servicealloc"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// The allocation of Services' cluster IPs and node ports (package
// servicealloc). As in kube, a Service write allocates before it
// validates, so validation sees the assigned values: Prepare (the IP
// family fields), Assign, validate, then the write, whose transaction
// carries the claims and releases (storage.Extra). A claim that fails is
// answered with 422 when the client asked for the value; when the
// allocator chose it, the write is tried again against the allocation read
// from etcd, and a full range is 500 as in kube.

// maxAssignAttempts bounds the writes one request tries while values the
// allocator chose turn out taken.
const maxAssignAttempts = 8

// serviceWrite is the allocation of one Service write across its
// attempts. A nil *serviceWrite (any other kind, or a status update) does
// nothing.
type serviceWrite struct {
	alloc *servicealloc.Allocator
	base  *corev1.Service // the service as prepared, before Assign
	old   *corev1.Service
	as    *servicealloc.Assignment
}

// newServiceWrite starts the allocation of a write of obj over old (nil on
// create), running Prepare. It returns nil for objects that are not
// Services.
func (s *Server) newServiceWrite(q *request, obj, old schemas.Object) (*serviceWrite, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok || q.res.Plural != "services" || q.res.GroupVersion.Group != "" {
		return nil, nil
	}
	var oldSvc *corev1.Service
	if old != nil {
		oldSvc = old.(*corev1.Service)
	}
	if errs := s.services.Prepare(svc, oldSvc); len(errs) > 0 {
		return nil, invalid(q.res, svc.Name, errs)
	}
	return &serviceWrite{alloc: s.services, base: svc.DeepCopy(), old: oldSvc}, nil
}

// assign returns the object to validate and write: a fresh copy of the
// prepared service with its values assigned (against the allocation read
// after a failed claim, q.svcTaken), or obj itself for other kinds.
func (w *serviceWrite) assign(q *request, obj schemas.Object) (schemas.Object, error) {
	if w == nil {
		return obj, nil
	}
	svc := w.base.DeepCopy()
	as, err := w.alloc.Assign(svc, w.old, q.svcTaken)
	if err != nil {
		return nil, allocError(q, svc.Name, err)
	}
	w.as = as
	return svc, nil
}

func allocError(q *request, name string, err error) error {
	var inv *servicealloc.InvalidError
	switch {
	case errors.As(err, &inv):
		return invalid(q.res, name, inv.Errs)
	case errors.Is(err, servicealloc.ErrFull):
		return apierrors.NewInternalError(err)
	}
	return err
}

// extra is what the write's transaction commits besides the object.
func (w *serviceWrite) extra() []storage.Extra {
	if w == nil || w.as == nil {
		return nil
	}
	return []storage.Extra{w.as.Extra}
}

// failed decides what a failed write means. A claim of a requested value
// that was taken is 422; a claim of a chosen one reads the allocation for
// the next attempt and returns storage.ErrConflict, which the caller
// retries. Other errors pass through.
func (w *serviceWrite) failed(s *Server, q *request, err error) error {
	var ce *storage.ClaimError
	if w == nil || w.as == nil || !errors.As(err, &ce) {
		return err
	}
	if errs := w.as.Refused(ce); len(errs) > 0 {
		return invalid(q.res, w.base.Name, errs)
	}
	q.svcAttempts++
	if q.svcAttempts >= maxAssignAttempts {
		return apierrors.NewConflict(q.res.GroupResource(), w.base.Name, errors.New("too many concurrent allocations, try again"))
	}
	taken, rerr := s.services.ReadTaken(q.ctx())
	if rerr != nil {
		return rerr
	}
	q.svcTaken = taken
	return storage.ErrConflict
}

// checkDryRun is what kube's dry-run allocator does: a requested value
// that is taken is refused, nothing is claimed.
func (w *serviceWrite) checkDryRun(s *Server, q *request) error {
	if w == nil || w.as == nil {
		return nil
	}
	ce := &storage.ClaimError{}
	for _, c := range w.as.Extra.Claims {
		if _, err := s.store.Get(q.ctx(), c.Key); err == nil {
			ce.Taken = append(ce.Taken, c.Key)
		} else if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
	}
	if errs := w.as.Refused(ce); len(errs) > 0 {
		return invalid(q.res, w.base.Name, errs)
	}
	return nil
}

// releases is what deleting obj releases: a Service's allocation keys.
func (s *Server) releases(obj schemas.Object) []storage.Extra {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil
	}
	keys := s.services.Held(svc)
	if len(keys) == 0 {
		return nil
	}
	return []storage.Extra{{Releases: keys}}
}
