package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// statusFor turns any error into the metav1.Status a Kubernetes client
// expects. A call (etcd's, most often) given up because the request's
// deadline passed is 504 Timeout, as kube's finisher answers it; other
// errors that are not API errors become 500 InternalError.
func statusFor(err error) metav1.Status {
	var se apierrors.APIStatus
	if !errors.As(err, &se) && errors.Is(err, context.DeadlineExceeded) {
		se = apierrors.NewTimeoutError("request did not complete within requested timeout - "+context.DeadlineExceeded.Error(), 0)
	}
	if se != nil {
		st := se.Status()
		st.Kind, st.APIVersion = "Status", "v1"
		if st.Status == "" {
			st.Status = metav1.StatusFailure
		}
		return st
	}
	st := apierrors.NewInternalError(err).Status()
	st.Kind, st.APIVersion = "Status", "v1"
	return st
}

func writeStatus(w http.ResponseWriter, err error) {
	st := statusFor(err)
	code := int(st.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, &st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b = []byte(fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":%q,"reason":"InternalError","code":500}`, err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func errBadRequest(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}

func errEntityTooLarge(limit int64) error {
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", limit))
}

func errUnsupportedMedia(ct string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "", fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got %q)", ct), 0, false)
}

func errNotAcceptable() error {
	return apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "", "only the following media types are accepted: application/json, application/yaml, application/json;as=Table;v=v1;g=meta.k8s.io", 0, false)
}

func errMethodNotSupported(res schema.GroupResource, verb string) error {
	return apierrors.NewMethodNotSupported(res, verb)
}
