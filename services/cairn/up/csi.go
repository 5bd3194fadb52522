package up

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/csi/csiclient"
	"github.com/cairn-dev/cairn/services/csi/hostpath"
	"github.com/cairn-dev/cairn/services/csi/registrar"
	"github.com/cairn-dev/cairn/services/kubelet"
)

// DefaultStorageClass is the StorageClass cairn up installs for its
// driver, the default class, as kind's and k3s's "standard" and
// "local-path".
const DefaultStorageClass = "standard"

// KubeletDir is the kubelet's root directory under a data directory
// (kubelet.RunNode's Dir/kubelet).
func KubeletDir(root string) string { return filepath.Join(root, "kubelet") }

// CSISocket is where cairn up's CSI driver serves: under the kubelet's
// plugins directory as kube's drivers do (/var/lib/kubelet/plugins/NAME/),
// or under /run/cairn-csi/<hash of root> when that path is too long for a
// unix socket.
func CSISocket(root string) string {
	p := filepath.Join(KubeletDir(root), "plugins", hostpath.DriverName, "csi.sock")
	if len(p) > 100 {
		sum := sha256.Sum256([]byte(root))
		p = filepath.Join("/run/cairn-csi", hex.EncodeToString(sum[:6]), "csi.sock")
	}
	return p
}

// csiDriverService runs the CSI driver hostpath.csi.cairn.dev for the node
// in process (its volumes under DataDir/csi-hostpath), registers it with
// the node's kubelet through the plugin registration directory (as
// node-driver-registrar), and installs its CSIDriver and the default
// StorageClass when they are missing. The controller-manager gets the
// driver's socket as its --csi-endpoint.
type csiDriverService struct {
	cp   *controlPlaneService
	node string
}

func (s *csiDriverService) Name() string { return "csi-hostpath" }

func (s *csiDriverService) Describe() string {
	return hostpath.DriverName + ", StorageClass " + DefaultStorageClass + " (default)"
}

func (s *csiDriverService) Run(ctx context.Context, ready func()) error {
	root := s.cp.paths.Root
	sock := CSISocket(root)
	log := s.cp.log.With("service", "csi-hostpath")
	reg, err := registrar.New(registrar.Config{Dir: kubelet.PluginRegistrationDir(root), Driver: hostpath.DriverName,
		Endpoint: "unix://" + sock, Log: log})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() {
		errc <- hostpath.Run(rctx, hostpath.Config{Endpoint: "unix://" + sock, NodeID: s.node,
			StateDir: filepath.Join(root, "csi-hostpath"), Version: "cairn", Log: log})
	}()
	go func() { errc <- reg.Serve(rctx) }()
	stop := func(err error) error {
		cancel()
		return errors.Join(err, <-errc, <-errc)
	}
	c, err := csiclient.Dial("unix://" + sock)
	if err != nil {
		return stop(err)
	}
	defer c.Close()
	wctx, wcancel := context.WithTimeout(rctx, time.Minute)
	err = c.WaitReady(wctx, 50*time.Millisecond)
	wcancel()
	if err != nil {
		if ctx.Err() != nil {
			return stop(nil)
		}
		return stop(fmt.Errorf("up: csi driver: %w", err))
	}
	rc, err := clientcmd.BuildConfigFromFlags("", s.cp.paths.Kubeconfig)
	if err != nil {
		return stop(fmt.Errorf("up: csi driver: %w", err))
	}
	client, err := kubernetes.NewForConfig(consumer.WrapConfig(rc))
	if err != nil {
		return stop(fmt.Errorf("up: csi driver: %w", err))
	}
	for {
		err := EnsureStorage(rctx, client)
		if err == nil {
			break
		}
		log.Warn("installing the CSIDriver and the default StorageClass", "err", err)
		select {
		case <-ctx.Done():
			return stop(nil)
		case err := <-errc:
			cancel()
			return errors.Join(err, <-errc)
		case <-time.After(2 * time.Second):
		}
	}
	ready()
	select {
	case <-ctx.Done():
		return stop(nil)
	case err := <-errc:
		cancel()
		return errors.Join(err, <-errc)
	}
}

// EnsureStorage creates what the driver needs in the cluster if it is
// missing, as csi-driver-host-path's deployment does, and leaves objects
// already there (a user's edits) alone: the CSIDriver (attachRequired,
// podInfoOnMount, persistent and ephemeral volumes, fsGroupPolicy File)
// and the StorageClass standard, the default class (WaitForFirstConsumer,
// expansion allowed, reclaim Delete).
func EnsureStorage(ctx context.Context, client kubernetes.Interface) error {
	drv := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: hostpath.DriverName}, Spec: storagev1.CSIDriverSpec{
		AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(true),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
		FSGroupPolicy:        ptr.To(storagev1.FileFSGroupPolicy)}}
	if _, err := client.StorageV1().CSIDrivers().Create(ctx, drv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("up: CSIDriver %s: %w", drv.Name, err)
	}
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultStorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:          hostpath.DriverName,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowVolumeExpansion: ptr.To(true),
	}
	if _, err := client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("up: StorageClass %s: %w", sc.Name, err)
	}
	return nil
}
