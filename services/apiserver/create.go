package apiserver

import (
	"encoding/json"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	sigsjson "sigs.k8s.io/json"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

func jsonUnmarshal(b []byte, v any) error { return sigsjson.UnmarshalCaseSensitivePreserveInts(b, v) }

func (s *Server) create(q *request) {
	obj, err := decodeRequestObject(q.r, q.res, strictFields(q))
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	out, err := s.createObject(q, obj)
	if err != nil {
		writeStatus(q.w, err)
		return
	}
	s.respondObject(q, http.StatusCreated, out)
}

// checkNamespace reconciles the namespace in the body with the URL's.
func checkNamespace(q *request, obj schemas.Object) error {
	if !q.res.Namespaced {
		if obj.GetNamespace() != "" && q.res.Plural != "namespaces" {
			obj.SetNamespace("")
		}
		return nil
	}
	switch ns := obj.GetNamespace(); {
	case ns == "":
		obj.SetNamespace(q.info.Namespace)
	case ns != q.info.Namespace:
		return errBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

// createObject runs the create path: namespace and name, defaulting,
// admission, system fields, validation, then one etcd transaction.
func (s *Server) createObject(q *request, obj schemas.Object) (schemas.Object, error) {
	if err := checkNamespace(q, obj); err != nil {
		return nil, err
	}
	if q.res.Namespaced && q.info.Namespace == "" {
		return nil, errBadRequest("the namespace of the object must be set in the URL")
	}
	generated := false
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		generated = true
	}
	if q.res.Default != nil {
		q.res.Default(obj)
	}
	ar := &AdmissionRequest{Resource: q.res, Operation: "CREATE", Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Object: obj, User: userFrom(q.ctx()), DryRun: isDryRun(q)}
	if err := s.mutate(ar); err != nil {
		return nil, err
	}
	if err := s.mutateWebhooks(q, ar); err != nil {
		return nil, err
	}
	obj = ar.Object
	if err := s.admit(q.ctx(), ar); err != nil {
		return nil, err
	}
	// The UID and a generated name come first, as kube's Store.Create
	// fills them in before the strategy runs: a Job's PrepareForCreate
	// selects its pods by its UID and labels them with its name.
	obj.SetUID(uuid.NewUUID())
	if generated {
		obj.SetName(obj.GetGenerateName() + rand.String(5))
	}
	if q.res.PrepareForCreate != nil {
		q.res.PrepareForCreate(obj)
	}
	if q.res.SetRequestor != nil {
		u := userFrom(q.ctx())
		q.res.SetRequestor(obj, u.User, u.Groups)
	}
	obj.SetCreationTimestamp(metav1.NewTime(s.now().Truncate(1e9)))
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetResourceVersion("")
	obj.SetSelfLink("")
	if !q.applied {
		obj.SetManagedFields(nil)
	}
	if obj.GetGeneration() == 0 {
		obj.SetGeneration(1)
	}
	for attempt := 0; ; attempt++ {
		if generated && attempt > 0 {
			obj.SetName(obj.GetGenerateName() + rand.String(5))
		}
		// A Service gets its cluster IP and node ports before validation,
		// as in kube (services.go); out is then a copy of obj.
		w, err := s.newServiceWrite(q, obj, nil)
		if err != nil {
			return nil, err
		}
		out, err := w.assign(q, obj)
		if err != nil {
			return nil, err
		}
		if q.res.ValidateCreate != nil {
			if errs := q.res.ValidateCreate(out); len(errs) > 0 {
				return nil, invalid(q.res, out.GetName(), errs)
			}
		}
		va := *ar
		va.Object, va.Name = out, out.GetName()
		if err := s.validateWebhooks(q, &va); err != nil {
			return nil, err
		}
		rev, err := s.storeCreate(q, out, w)
		if errors.Is(err, storage.ErrExists) {
			if generated && attempt < 3 {
				continue
			}
			return nil, apierrors.NewAlreadyExists(q.res.GroupResource(), out.GetName())
		}
		if err = w.failed(s, q, err); errors.Is(err, storage.ErrConflict) {
			attempt-- // not a name clash
			continue
		}
		if err != nil {
			return nil, err
		}
		if isDryRun(q) {
			return out, nil
		}
		out.SetResourceVersion(rev.String())
		if q.res.Plural == "namespaces" {
			s.nsCache.forget(out.GetName())
		}
		return out, nil
	}
}

// deepCopy copies an object through JSON; the typed DeepCopyObject is used
// where available.
func deepCopy(obj schemas.Object) schemas.Object {
	if c, ok := obj.DeepCopyObject().(schemas.Object); ok {
		return c
	}
	b, _ := json.Marshal(obj)
	var out schemas.Object
	_ = json.Unmarshal(b, &out)
	return out
}

// storeCreate writes a new object; storage.ErrExists if its name is taken.
// A dry run does what kube-apiserver's dry-run storage does: everything but
// the write, so a taken name is still a conflict, and it returns revision 0.
// w, if not nil, is the allocation of a Service, committed with it.
func (s *Server) storeCreate(q *request, obj schemas.Object, w *serviceWrite) (events.Revision, error) {
	key := storage.Key(q.res.GroupVersion.Group, q.res.Plural, obj.GetNamespace(), obj.GetName())
	if isDryRun(q) {
		_, err := s.store.Get(q.ctx(), key)
		switch {
		case err == nil:
			return 0, storage.ErrExists
		case errors.Is(err, storage.ErrNotFound):
			return 0, w.checkDryRun(s, q)
		}
		return 0, err
	}
	val, err := encodeFor(q.res, obj)
	if err != nil {
		return 0, err
	}
	rev, err := s.store.Create(q.ctx(), key, val, s.newWriteMeta(q, "create"), w.extra()...)
	if err == nil {
		s.writes.put(storage.KV{Key: key, Value: val, Revision: rev, CreateRevision: rev})
	}
	return rev, err
}
