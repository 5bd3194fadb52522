package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// SystemNamespaces are created at start-up when missing, as kube-apiserver's
// bootstrap controller does.
var SystemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// Bootstrap creates the system namespaces that do not exist yet. Each is one
// committed change by user system:apiserver, so it is on the log like any
// other.
func Bootstrap(ctx context.Context, st *storage.Store, reg *schemas.Registry) error {
	res, ok := reg.Lookup("", "v1", "namespaces")
	if !ok {
		return errors.New("controlplane: namespaces not registered")
	}
	for _, name := range SystemNamespaces {
		key := storage.Key("", "namespaces", "", name)
		if _, err := st.Get(ctx, key); err == nil {
			continue
		} else if !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("controlplane: bootstrap: %w", err)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		res.Default(ns)
		ns.SetGroupVersionKind(res.GVK())
		ns.UID = uuid.NewUUID()
		ns.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
		ns.Labels = map[string]string{"kubernetes.io/metadata.name": name}
		b, err := json.Marshal(ns)
		if err != nil {
			return err
		}
		if _, err := st.Create(ctx, key, b, systemMeta("create")); err != nil && !errors.Is(err, storage.ErrExists) {
			return fmt.Errorf("controlplane: bootstrap namespace %s: %w", name, err)
		}
	}
	return nil
}
