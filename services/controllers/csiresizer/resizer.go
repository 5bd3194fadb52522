package csiresizer

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controllers/csiconn"
	"github.com/cairn-dev/cairn/services/controllers/csiprovisioner"
	"github.com/cairn-dev/cairn/services/eventrecord"
)

// Name is the controller's name in logs and its queue.
const Name = "csi-resizer"

// Event reasons external-resizer writes on claims.
const (
	ReasonResizing                 = "Resizing"
	ReasonFileSystemResizeRequired = "FileSystemResizeRequired"
	ReasonVolumeResizeSuccessful   = "VolumeResizeSuccessful"
	ReasonVolumeResizeFailed       = "VolumeResizeFailed"
)

var (
	claimsResource  = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	volumesResource = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	claimKind       = corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
)

// Options configure the controller.
type Options struct {
	// Endpoints: driver name -> unix:///path of its controller service.
	Endpoints map[string]string
	Workers   int
	Timeout   time.Duration
	Clock     func() time.Time
}

// Controller is external-resizer's controller side.
type Controller struct {
	log      *slog.Logger
	now      func() time.Time
	timeout  time.Duration
	client   kubernetes.Interface
	pool     *csiconn.Pool
	claims   *consumer.Cache[*corev1.PersistentVolumeClaim]
	volumes  *consumer.Cache[*corev1.PersistentVolume]
	queue    *consumer.Controller
	recorder *eventrecord.Recorder
}

// New builds the controller on m; without endpoints it registers nothing.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if len(opts.Endpoints) == 0 {
		return nil, nil
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Timeout <= 0 {
		opts.Timeout = csiprovisioner.DefaultTimeout
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	c := &Controller{log: m.Log().With("controller", Name), now: opts.Clock, timeout: opts.Timeout, client: m.Client()}
	wrap := func(e error) error { return fmt.Errorf("csiresizer: new: %w", e) }
	var err error
	if c.pool, err = csiconn.ForManager(m, opts.Endpoints); err != nil {
		return nil, wrap(err)
	}
	if c.recorder, err = eventrecord.ForManager(m, eventrecord.Config{Component: "external-resizer", Now: opts.Clock, Log: c.log}, 0, 0); err != nil {
		return nil, wrap(err)
	}
	if c.claims, err = consumer.CacheFor[*corev1.PersistentVolumeClaim](m, claimsResource); err != nil {
		return nil, wrap(err)
	}
	if c.volumes, err = consumer.CacheFor[*corev1.PersistentVolume](m, volumesResource); err != nil {
		return nil, wrap(err)
	}
	if c.queue, err = m.NewController(consumer.ControllerConfig{Name: Name, Workers: opts.Workers, WaitFor: []consumer.Syncer{c.claims, c.volumes},
		Reconciler: consumer.ReconcilerFunc(c.reconcile)}); err != nil {
		return nil, wrap(err)
	}
	consumer.For(c.claims, c.queue, nil)
	return c, nil
}

func (c *Controller) reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	pvc, ok := c.claims.Get(ns, name)
	if !ok || pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" || pvc.DeletionTimestamp != nil {
		return consumer.Result{}, nil
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pvc.Status.Capacity[corev1.ResourceStorage]
	if want.Cmp(have) <= 0 {
		return consumer.Result{}, nil
	}
	switch pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] {
	case corev1.PersistentVolumeClaimNodeResizePending, corev1.PersistentVolumeClaimNodeResizeInProgress:
		return consumer.Result{}, nil // the kubelet's turn (external-resizer's expandAndRecover)
	}
	pv, ok := c.volumes.Get("", pvc.Spec.VolumeName)
	if !ok || pv.Spec.CSI == nil || !c.pool.Has(pv.Spec.CSI.Driver) || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return consumer.Result{}, nil
	}
	conn, err := c.pool.Get(pv.Spec.CSI.Driver)
	if err != nil {
		return consumer.Result{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	caps, err := conn.Capabilities(cctx)
	if err != nil {
		return consumer.Result{}, err
	}
	if !caps.Expand {
		return consumer.Result{}, nil
	}
	// Resizing, as external-resizer marks it before the call.
	n := pvc.DeepCopy()
	setCondition(n, corev1.PersistentVolumeClaimResizing, "", c.now())
	n.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: want}
	n.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{
		corev1.ResourceStorage: corev1.PersistentVolumeClaimControllerResizeInProgress}
	if n, err = c.client.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return consumer.Result{}, conflictExpected(err)
	}
	c.event(ctx, n, corev1.EventTypeNormal, ReasonResizing, "External resizer is resizing volume "+pv.Name)
	vcs, err := csiprovisioner.VolumeCapabilities(pv.Spec.AccessModes, pv.Spec.VolumeMode, pv.Spec.CSI.FSType, pv.Spec.MountOptions, caps.SingleNodeMultiWriter)
	if err != nil || len(vcs) == 0 {
		return consumer.Result{}, c.failed(ctx, n, fmt.Errorf("volume capability of %s: %v", pv.Name, err), true)
	}
	rep, err := conn.Controller.ControllerExpandVolume(cctx, &csi.ControllerExpandVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle,
		CapacityRange: &csi.CapacityRange{RequiredBytes: want.Value()}, VolumeCapability: vcs[0]})
	if err != nil {
		st, _ := status.FromError(err)
		return consumer.Result{}, c.failed(ctx, n, fmt.Errorf("resize volume %q by resizer %q failed: %w", pv.Name, pv.Spec.CSI.Driver, err),
			st.Code() == codes.InvalidArgument || st.Code() == codes.OutOfRange)
	}
	size := want
	if got := rep.GetCapacityBytes(); got > want.Value() {
		size = *resource.NewQuantity(got, resource.BinarySI)
	}
	npv := pv.DeepCopy()
	npv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	if _, err := c.client.CoreV1().PersistentVolumes().Update(ctx, npv, metav1.UpdateOptions{}); err != nil {
		return consumer.Result{}, conflictExpected(err)
	}
	if rep.GetNodeExpansionRequired() {
		setCondition(n, corev1.PersistentVolumeClaimFileSystemResizePending,
			"Waiting for user to (re-)start a pod to finish file system resize of volume on node.", c.now())
		removeCondition(n, corev1.PersistentVolumeClaimResizing)
		n.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = corev1.PersistentVolumeClaimNodeResizePending
		if _, err := c.client.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return consumer.Result{}, conflictExpected(err)
		}
		c.event(ctx, n, corev1.EventTypeNormal, ReasonFileSystemResizeRequired, "Require file system resize of volume on node")
		return consumer.Result{}, nil
	}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	removeCondition(n, corev1.PersistentVolumeClaimResizing)
	removeCondition(n, corev1.PersistentVolumeClaimFileSystemResizePending)
	n.Status.AllocatedResourceStatuses = nil
	if _, err := c.client.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return consumer.Result{}, conflictExpected(err)
	}
	c.event(ctx, n, corev1.EventTypeNormal, ReasonVolumeResizeSuccessful, "Resize volume succeeded")
	return consumer.Result{}, nil
}

// failed records a failed expansion and returns it for a retry.
func (c *Controller) failed(ctx context.Context, pvc *corev1.PersistentVolumeClaim, err error, infeasible bool) error {
	c.event(ctx, pvc, corev1.EventTypeWarning, ReasonVolumeResizeFailed, err.Error())
	if infeasible {
		n := pvc.DeepCopy()
		n.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = corev1.PersistentVolumeClaimControllerResizeInfeasible
		removeCondition(n, corev1.PersistentVolumeClaimResizing)
		if _, uerr := c.client.CoreV1().PersistentVolumeClaims(n.Namespace).UpdateStatus(ctx, n, metav1.UpdateOptions{}); uerr != nil {
			c.log.Warn("resize status", "claim", n.Namespace+"/"+n.Name, "err", uerr)
		}
	}
	return fmt.Errorf("csiresizer: %w", err)
}

func setCondition(pvc *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType, msg string, now time.Time) {
	for i := range pvc.Status.Conditions {
		if pvc.Status.Conditions[i].Type == t {
			pvc.Status.Conditions[i].Message = msg
			return
		}
	}
	pvc.Status.Conditions = append(pvc.Status.Conditions, corev1.PersistentVolumeClaimCondition{Type: t, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(now), Message: msg})
}

func removeCondition(pvc *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType) {
	out := pvc.Status.Conditions[:0]
	for _, c := range pvc.Status.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	pvc.Status.Conditions = out
}

func (c *Controller) event(ctx context.Context, pvc *corev1.PersistentVolumeClaim, typ, reason, msg string) {
	c.recorder.Event(ctx, eventrecord.Ref(pvc, claimKind), typ, reason, "", msg)
}

func conflictExpected(err error) error {
	err = fmt.Errorf("csiresizer: %w", err)
	if apierrors.IsConflict(err) {
		return consumer.ExpectedError(err)
	}
	return err
}
