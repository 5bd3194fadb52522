package serviceaccount

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/codec"
	"github.com/cairn-dev/cairn/services/apiserver/objcache"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
)

// Caches hold what the token authenticator and the admission plugin look
// up on every request: the ServiceAccounts, and of Pods and Secrets only
// what a token's binding is checked against (UID, deletion, and for
// service-account-token Secrets the token). Each resource is a snapshot
// of etcd at one revision, then the log through the apiserver's watch hub,
// as an informer keeps its store; only the snapshot reads etcd.
//
// Like kube's informer-backed getters, a lookup that misses the cache
// reads etcd (the object may be newer than the cache, which lags the log
// by milliseconds): a hit never touches etcd. Safe for concurrent use.
type Caches struct {
	serviceAccounts *objcache.Cache[*corev1.ServiceAccount]
	pods            *objcache.Cache[Pod]
	secrets         *objcache.Cache[Secret]
}

// Pod is what the caches keep of a pod.
type Pod struct {
	UID               types.UID
	DeletionTimestamp *metav1.Time
	NodeName          string
}

// Secret is what the caches keep of a secret: the token only for
// service-account-token Secrets.
type Secret struct {
	UID               types.UID
	DeletionTimestamp *metav1.Time
	Type              corev1.SecretType
	ServiceAccount    string // the kubernetes.io/service-account.name annotation
	Token             []byte
}

// NewCaches builds caches that snapshot from store and follow hub.
func NewCaches(store *storage.Store, hub *watchhub.Hub, log *slog.Logger) *Caches {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Caches{
		serviceAccounts: objcache.New(objcache.Config[*corev1.ServiceAccount]{Resource: "serviceaccounts", Store: store, Hub: hub, Log: log,
			Decode: func(raw []byte) (objcache.Key, *corev1.ServiceAccount, error) {
				sa := &corev1.ServiceAccount{}
				err := codec.Unmarshal(raw, sa)
				return objcache.Key{sa.Namespace, sa.Name}, sa, err
			}}),
		pods:    objcache.New(objcache.Config[Pod]{Resource: "pods", Decode: decodePod, FromEvent: podFromEvent, Store: store, Hub: hub, Log: log}),
		secrets: objcache.New(objcache.Config[Secret]{Resource: "secrets", Decode: decodeSecret, Store: store, Hub: hub, Log: log}),
	}
}

// meta is the part of metadata the light decoders read.
type meta struct {
	Namespace         string            `json:"namespace"`
	Name              string            `json:"name"`
	UID               types.UID         `json:"uid"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
	Annotations       map[string]string `json:"annotations"`
}

// podFromEvent reads a pod from the envelope (UID, node) unless the pod is
// being deleted: pod events are the busiest, and most are status updates
// of pods that are not.
func podFromEvent(ev *events.Event, _ *Pod) (Pod, bool) {
	if ev.UID == "" || bytes.Contains(ev.Object, []byte(`"deletionTimestamp"`)) {
		return Pod{}, false
	}
	return Pod{UID: types.UID(ev.UID), NodeName: ev.NodeName}, true
}

func decodePod(raw []byte) (objcache.Key, Pod, error) {
	var p struct {
		Metadata meta `json:"metadata"`
		Spec     struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
	}
	err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &p)
	return [2]string{p.Metadata.Namespace, p.Metadata.Name}, Pod{UID: p.Metadata.UID, DeletionTimestamp: p.Metadata.DeletionTimestamp, NodeName: p.Spec.NodeName}, err
}

func decodeSecret(raw []byte) (objcache.Key, Secret, error) {
	var s struct {
		Metadata meta              `json:"metadata"`
		Type     corev1.SecretType `json:"type"`
		Data     map[string][]byte `json:"data"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &s); err != nil {
		return [2]string{}, Secret{}, err
	}
	out := Secret{UID: s.Metadata.UID, DeletionTimestamp: s.Metadata.DeletionTimestamp, Type: s.Type}
	if s.Type == corev1.SecretTypeServiceAccountToken {
		out.ServiceAccount = s.Metadata.Annotations[corev1.ServiceAccountNameKey]
		out.Token = s.Data[corev1.ServiceAccountTokenKey]
	}
	return [2]string{s.Metadata.Namespace, s.Metadata.Name}, out, nil
}

// Run fills and follows the three resources until ctx ends.
func (c *Caches) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{c.serviceAccounts.Run, c.pods.Run, c.secrets.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	wg.Wait()
	return nil
}

// WaitForSync blocks until every resource has its first snapshot or ctx ends.
func (c *Caches) WaitForSync(ctx context.Context) error {
	for _, ch := range []<-chan struct{}{c.serviceAccounts.Synced(), c.pods.Synced(), c.secrets.Synced()} {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("serviceaccount: wait for the caches: %w", ctx.Err())
		}
	}
	return nil
}

// ServiceAccount returns the ServiceAccount (shared: do not modify), or a
// NotFound API error.
func (c *Caches) ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return c.serviceAccounts.Get(ctx, namespace, name)
}

// Pod returns what the caches know of a pod, or a NotFound API error.
func (c *Caches) Pod(ctx context.Context, namespace, name string) (Pod, error) {
	return c.pods.Get(ctx, namespace, name)
}

// Secret returns what the caches know of a secret, or a NotFound API error.
func (c *Caches) Secret(ctx context.Context, namespace, name string) (Secret, error) {
	return c.secrets.Get(ctx, namespace, name)
}
