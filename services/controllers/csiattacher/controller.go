package csiattacher

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/csiconn"
)

// Names of the two controllers in logs and queues.
const (
	AttachDetachName = "attachdetach"
	AttacherName     = "csi-attacher"
)

// DefaultTimeout bounds one CSI call (external-attacher's --timeout).
const DefaultTimeout = 15 * time.Second

// indexNode indexes pods and VolumeAttachments by node name.
const indexNode = "csiattacher.node"

var (
	podsResource        = corev1.SchemeGroupVersion.WithResource("pods")
	nodesResource       = corev1.SchemeGroupVersion.WithResource("nodes")
	claimsResource      = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	volumesResource     = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	driversResource     = storagev1.SchemeGroupVersion.WithResource("csidrivers")
	csiNodesResource    = storagev1.SchemeGroupVersion.WithResource("csinodes")
	attachmentsResource = storagev1.SchemeGroupVersion.WithResource("volumeattachments")
)

// Options configure the controllers.
type Options struct {
	// Endpoints are the drivers whose external-attacher this runs: driver
	// name -> unix:///path of its controller service.
	Endpoints map[string]string
	// Workers per queue; 0 means 4.
	Workers int
	// Timeout of each CSI call; 0 means DefaultTimeout.
	Timeout time.Duration
	Clock   func() time.Time
}

// Controller is the attach/detach controller and the external-attacher of
// every driver in Options.Endpoints.
type Controller struct {
	log         *slog.Logger
	now         func() time.Time
	timeout     time.Duration
	client      kubernetes.Interface
	pool        *csiconn.Pool
	pods        *consumer.Cache[*corev1.Pod]
	nodes       *consumer.Cache[*corev1.Node]
	claims      *consumer.Cache[*corev1.PersistentVolumeClaim]
	volumes     *consumer.Cache[*corev1.PersistentVolume]
	drivers     *consumer.Cache[*storagev1.CSIDriver]
	csiNodes    *consumer.Cache[*storagev1.CSINode]
	attachments *consumer.Cache[*storagev1.VolumeAttachment]
	nodeQ       *consumer.Controller
	attachQ     *consumer.Controller
	volumeQ     *consumer.Controller
}

// New builds the controllers on m: the attach/detach controller always,
// the external-attacher when there are endpoints.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	c := &Controller{log: m.Log().With("controller", AttachDetachName), now: opts.Clock, timeout: opts.Timeout, client: m.Client()}
	var err error
	wrap := func(e error) error { return fmt.Errorf("csiattacher: new: %w", e) }
	if c.pods, err = consumer.CacheFor[*corev1.Pod](m, podsResource,
		consumer.WithIndexers(map[string]consumer.IndexFunc[*corev1.Pod]{indexNode: podNode})); err != nil {
		return nil, wrap(err)
	}
	if c.nodes, err = consumer.CacheFor[*corev1.Node](m, nodesResource); err != nil {
		return nil, wrap(err)
	}
	if c.claims, err = consumer.CacheFor[*corev1.PersistentVolumeClaim](m, claimsResource); err != nil {
		return nil, wrap(err)
	}
	if c.volumes, err = consumer.CacheFor[*corev1.PersistentVolume](m, volumesResource); err != nil {
		return nil, wrap(err)
	}
	if c.drivers, err = consumer.CacheFor[*storagev1.CSIDriver](m, driversResource); err != nil {
		return nil, wrap(err)
	}
	if c.csiNodes, err = consumer.CacheFor[*storagev1.CSINode](m, csiNodesResource); err != nil {
		return nil, wrap(err)
	}
	if c.attachments, err = consumer.CacheFor[*storagev1.VolumeAttachment](m, attachmentsResource,
		consumer.WithIndexers(map[string]consumer.IndexFunc[*storagev1.VolumeAttachment]{indexNode: attachmentNode})); err != nil {
		return nil, wrap(err)
	}
	wait := []consumer.Syncer{c.pods, c.nodes, c.claims, c.volumes, c.drivers, c.csiNodes, c.attachments}
	if c.nodeQ, err = m.NewController(consumer.ControllerConfig{Name: AttachDetachName, Workers: opts.Workers, WaitFor: wait,
		Reconciler: consumer.ReconcilerFunc(c.reconcileNode)}); err != nil {
		return nil, wrap(err)
	}
	c.watchNodes()
	if len(opts.Endpoints) == 0 {
		return c, nil
	}
	if c.pool, err = csiconn.ForManager(m, opts.Endpoints); err != nil {
		return nil, wrap(err)
	}
	if c.attachQ, err = m.NewController(consumer.ControllerConfig{Name: AttacherName, Workers: opts.Workers, WaitFor: wait,
		Reconciler: consumer.ReconcilerFunc(c.reconcileAttachment)}); err != nil {
		return nil, wrap(err)
	}
	if c.volumeQ, err = m.NewController(consumer.ControllerConfig{Name: AttacherName + "-volumes", Workers: opts.Workers, WaitFor: wait,
		Reconciler: consumer.ReconcilerFunc(c.reconcileVolume)}); err != nil {
		return nil, wrap(err)
	}
	consumer.For(c.attachments, c.attachQ, nil)
	consumer.For(c.volumes, c.volumeQ, nil)
	consumer.Watch(c.attachments, c.volumeQ, func(va *storagev1.VolumeAttachment) []string {
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil {
			return []string{*pv}
		}
		return nil
	})
	// A CSINode naming the driver's node id lets waiting attachments go.
	consumer.Watch(c.csiNodes, c.attachQ, func(cn *storagev1.CSINode) []string {
		var keys []string
		for _, va := range c.attachments.ByIndex(indexNode, cn.Name) {
			if !va.Status.Attached {
				keys = append(keys, va.Name)
			}
		}
		return keys
	})
	return c, nil
}

// watchNodes queues, for the attach/detach controller, the nodes whose
// needs an object's change may alter.
func (c *Controller) watchNodes() {
	consumer.For(c.nodes, c.nodeQ, nil)
	consumer.Watch(c.pods, c.nodeQ, func(p *corev1.Pod) []string { return podNode(p) })
	consumer.Watch(c.attachments, c.nodeQ, func(va *storagev1.VolumeAttachment) []string { return attachmentNode(va) })
	consumer.Watch(c.claims, c.nodeQ, func(pvc *corev1.PersistentVolumeClaim) []string { return c.nodesUsing(pvc.Namespace, pvc.Name) })
	consumer.Watch(c.volumes, c.nodeQ, func(pv *corev1.PersistentVolume) []string {
		if ref := pv.Spec.ClaimRef; ref != nil {
			return c.nodesUsing(ref.Namespace, ref.Name)
		}
		return nil
	})
	consumer.Watch(c.drivers, c.nodeQ, func(*storagev1.CSIDriver) []string {
		var keys []string
		for _, n := range c.nodes.List(nil) {
			keys = append(keys, n.Name)
		}
		return keys
	})
}

// nodesUsing are the nodes of the pods in ns that use claim.
func (c *Controller) nodesUsing(ns, claim string) []string {
	var out []string
	for _, p := range c.pods.ByIndex(consumer.IndexNamespace, ns) {
		if p.Spec.NodeName == "" {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if claimName(p, v) == claim {
				out = append(out, p.Spec.NodeName)
				break
			}
		}
	}
	return out
}

func podNode(p *corev1.Pod) []string {
	if p.Spec.NodeName == "" {
		return nil
	}
	return []string{p.Spec.NodeName}
}

func attachmentNode(va *storagev1.VolumeAttachment) []string { return []string{va.Spec.NodeName} }

// claimName is the claim a pod volume uses, "" for other volumes.
func claimName(p *corev1.Pod, v corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return p.Name + "-" + v.Name
	}
	return ""
}

var unsafeDriverChars = regexp.MustCompile(`[^a-zA-Z0-9-]`)

// Finalizer is external-attacher's finalizer for driver, on the
// VolumeAttachments it attached and their PersistentVolumes.
func Finalizer(driver string) string {
	name := unsafeDriverChars.ReplaceAllString(driver, "-")
	if name != "" && name[len(name)-1] == '-' {
		name += "X"
	}
	return "external-attacher/" + name
}
