package fit

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CauseOvercommitted is the StatusCause type of a binding the apiserver
// refused because the pod does not fit the node: binding it would
// overcommit the node. The 409 Conflict carries one such cause per
// insufficient resource, with Field "target.name" (the Binding's node)
// and as Message the resource's Insufficient.String, e.g. "Insufficient
// cpu (requested 200, allocated 600 of 700)". It is cairn's own; a
// client that does not know it still sees a 409 Conflict.
const CauseOvercommitted metav1.CauseType = "cairn.dev/Overcommitted"

// overcommitField is the field of a Binding that names the node.
const overcommitField = "target.name"

// Overcommitted is the error of a binding of pod (of resource gr) to node
// refused for lacks: 409 Conflict, the message "binding rejected: node
// <node>: <lacks>" and a CauseOvercommitted cause per lack.
func Overcommitted(gr schema.GroupResource, pod, node string, lacks []Insufficient) *apierrors.StatusError {
	msgs := make([]string, len(lacks))
	for i, l := range lacks {
		msgs[i] = l.String()
	}
	err := apierrors.NewConflict(gr, pod, fmt.Errorf("binding rejected: node %s: %s", node, strings.Join(msgs, ", ")))
	for _, m := range msgs {
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes,
			metav1.StatusCause{Type: CauseOvercommitted, Field: overcommitField, Message: m})
	}
	return err
}

// IsOvercommitted reports whether err (or an error it wraps) is a 409
// Conflict refusing a binding with a CauseOvercommitted cause.
func IsOvercommitted(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	s := st.Status()
	if s.Code != http.StatusConflict || s.Details == nil {
		return false
	}
	for _, c := range s.Details.Causes {
		if c.Type == CauseOvercommitted {
			return true
		}
	}
	return false
}
