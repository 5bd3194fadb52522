package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// orphanInterval is how often the pod directories are checked for pods
// nobody runs any more (kube's kubelet cleans up orphaned pod dirs in its
// housekeeping, every 2 s).
const orphanInterval = 10 * time.Second

// teardownVolumes unmounts the pod's CSI volumes (see
// teardownCSIVolumes) and the tmpfs of its in-memory volumes (see
// unmountMemoryVolumes).
func (k *Kubelet) teardownVolumes(ctx context.Context, uid types.UID) error {
	if k.csi != nil {
		if err := k.teardownCSIVolumes(ctx, uid); err != nil {
			return err
		}
	}
	return k.unmountMemoryVolumes(uid)
}

// orphanLoop is the kubelet's reconstruction of volumes after a restart
// and its clean-up of orphaned pod directories: a pod directory whose pod
// the API no longer has, with no worker and nothing in the runtime (its
// pod was deleted while the kubelet was down, or a tear-down failed), has
// its CSI volumes unpublished and unstaged from the vol_data.json kept
// next to each mount and its tmpfs volumes unmounted, and is then
// removed. Pods that still exist keep
// their mounts as they are: a restarted kubelet adopts them.
func (k *Kubelet) orphanLoop(ctx context.Context) error {
	if err := k.pods.WaitForSync(ctx); err != nil {
		return nil
	}
	t := time.NewTicker(orphanInterval)
	defer t.Stop()
	for {
		k.cleanOrphans(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (k *Kubelet) cleanOrphans(ctx context.Context) {
	uids, err := k.podDirUIDs()
	if err != nil || len(uids) == 0 {
		k.logErr(ctx, "list pod dirs", err)
		return
	}
	known := map[types.UID]bool{}
	for _, p := range k.pods.List(labels.Everything()) {
		known[p.UID] = true
	}
	running, err := k.rt.ListPods(ctx)
	if err != nil {
		k.logErr(ctx, "orphans: list runtime pods", err)
		return
	}
	for _, uid := range uids {
		if known[uid] || k.workers.has(uid) || running[string(uid)] != nil {
			continue
		}
		if err := k.teardownVolumes(ctx, uid); err != nil {
			k.logErr(ctx, "orphaned pod "+string(uid)+": unmount volumes", err)
			continue
		}
		k.log.Info("removing orphaned pod dir", "uid", uid)
		k.removePodDirs(string(uid), "", "")
		logs, _ := filepath.Glob(filepath.Join(k.cfg.RootDir, "logs", "pods", "*_"+string(uid)))
		for _, l := range logs {
			k.logErr(ctx, "remove orphaned pod logs", os.RemoveAll(l))
		}
	}
}
