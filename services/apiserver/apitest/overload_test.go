package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestOverload: 200 clients create ConfigMaps as fast as they can for 20 s
// (loopback only) while a node renews its Lease and heartbeats its status
// every second through the same apiserver. API Priority and Fairness
// keeps the node's share (system-node-high) while the load's priority
// level, a small one the test configures, answers the excess 429 with
// Retry-After; nothing a refused request carried is written, every
// accepted create is whole, no renewal fails and none comes later than
// the Lease's duration, and the heap stays bounded.
func TestOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("overload run")
	}
	r := runOverload(t, 200, 20*time.Second)
	t.Logf("overload, 200 clients for 20 s: %.0f accepted/s, %.0f 429/s; lease renewal p99 %v loaded (%v unloaded, same run), max gap %v; heap %d MiB",
		r.acceptedPerSec(), r.rejectedPerSec(), r.renewP99, r.idleP99, r.maxGap.Round(time.Millisecond), r.heap>>20)
}

// BenchmarkOverload is TestOverload with 1,000 clients for 30 s
// (go tool task bench:overload).
func BenchmarkOverload(b *testing.B) {
	for range b.N {
		r := runOverload(b, 1000, 30*time.Second)
		b.ReportMetric(r.acceptedPerSec(), "accepted/s")
		b.ReportMetric(r.rejectedPerSec(), "429/s")
		b.ReportMetric(float64(r.renewP99.Microseconds())/1000, "lease-p99-ms")
		b.ReportMetric(float64(r.idleP99.Microseconds())/1000, "lease-p99-unloaded-ms")
		b.ReportMetric(float64(r.renewP99)/float64(max(r.idleP99, time.Microsecond)), "lease-p99-ratio")
		b.ReportMetric(float64(r.heap>>20), "heap-MiB")
	}
}

type overloadResult struct {
	accepted, rejected int
	elapsed            time.Duration
	renewP99, idleP99  time.Duration
	maxGap             time.Duration
	heap               uint64
}

func (r overloadResult) acceptedPerSec() float64 { return float64(r.accepted) / r.elapsed.Seconds() }
func (r overloadResult) rejectedPerSec() float64 { return float64(r.rejected) / r.elapsed.Seconds() }

// overloadLeaseSeconds is the node Lease's duration, kube's kubelet
// default: a renewal later than that lets the Lease expire.
const overloadLeaseSeconds = 40

func runOverload(t testing.TB, clients int, d time.Duration) overloadResult {
	// Every user may do everything: APF, not authorization, is under test.
	env := controlplanetest.Start(t, controlplanetest.Options{Authorizer: apiserver.AlwaysAllow{}, PriorityAndFairness: true})
	ctx := ctxFor(t, d+3*time.Minute)
	cs := env.Client
	const ns = "overload"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The load's own priority level: few seats, short queues.
	if _, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bulk"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr[int32](10),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 4, HandSize: 2, QueueLengthLimit: 10}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.FlowcontrolV1().FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "bulk"},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "bulk"},
			MatchingPrecedence:  100,
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "alice"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					Namespaces: []string{"*"}, ClusterScope: true}},
			}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := startOverloadNode(t, ctx, env)
	// Until the classification takes the new schema, alice's requests go
	// to global-default: wait for the response header naming bulk.
	waitFlowSchemaInUse(t, ctx, env, "bulk")
	time.Sleep(3 * time.Second) // the node unloaded, same run
	idle := node.take()

	var accepted, rejected atomic.Int64
	var mu sync.Mutex
	acceptedNames, rejectedNames := map[string]bool{}, map[string]bool{}
	var noRetryAfter atomic.Int64
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	loadCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				name := fmt.Sprintf("c%d-%d", c, i)
				body, _ := json.Marshal(corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
					ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"client": fmt.Sprint(c), "i": fmt.Sprint(i)}})
				req, _ := http.NewRequestWithContext(context.WithoutCancel(loadCtx), http.MethodPost, env.URL+"/api/v1/namespaces/"+ns+"/configmaps", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+controlplanetest.UserToken)
				resp, err := hc.Do(req)
				if err != nil {
					t.Errorf("create %s: %v", name, err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				switch resp.StatusCode {
				case http.StatusCreated:
					accepted.Add(1)
					acceptedNames[name] = true
				case http.StatusTooManyRequests:
					rejected.Add(1)
					rejectedNames[name] = true
					if resp.Header.Get("Retry-After") == "" {
						noRetryAfter.Add(1)
					}
				default:
					t.Errorf("create %s: %d", name, resp.StatusCode)
				}
				// A client that honours Retry-After comes back later; this
				// one comes back at once, to keep the pressure.
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	loaded := node.take()
	node.stop()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)

	if rejected.Load() == 0 {
		t.Errorf("%d creates, none refused with 429: the bulk level did not hold back", accepted.Load())
	}
	if n := noRetryAfter.Load(); n > 0 {
		t.Errorf("%d 429 answers without Retry-After", n)
	}
	if len(node.errs) > 0 {
		t.Errorf("the node's %d renewals/heartbeats failed under load, first: %v", len(node.errs), node.errs[0])
	}
	if node.maxGap >= overloadLeaseSeconds*time.Second {
		t.Errorf("a Lease renewal came %v after the previous one: the %d s Lease expired", node.maxGap, overloadLeaseSeconds)
	}
	if ms.HeapInuse > 2<<30 {
		t.Errorf("heap in use %d MiB after the run", ms.HeapInuse>>20)
	}
	// Nothing half-written: exactly the accepted creates exist, each whole.
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "kube-root-ca") {
			continue
		}
		have[cm.Name] = true
		if !acceptedNames[cm.Name] {
			t.Errorf("configmap %s exists but was not accepted (refused: %v)", cm.Name, rejectedNames[cm.Name])
		}
		if cm.Data["client"] == "" || cm.Data["i"] == "" {
			t.Errorf("configmap %s is not whole: %v", cm.Name, cm.Data)
		}
	}
	for name := range acceptedNames {
		if !have[name] {
			t.Errorf("accepted configmap %s does not exist", name)
		}
	}
	return overloadResult{accepted: int(accepted.Load()), rejected: int(rejected.Load()), elapsed: elapsed,
		renewP99: pct99(loaded), idleP99: pct99(idle), maxGap: node.maxGap, heap: ms.HeapInuse}
}

// waitFlowSchemaInUse waits until alice's requests are classified by the
// FlowSchema name (kube's X-Kubernetes-PF-FlowSchema-UID header).
func waitFlowSchemaInUse(t testing.TB, ctx context.Context, env *controlplanetest.Env, name string) {
	fs, err := env.Client.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		r := do(t, env, call{method: http.MethodGet, path: "/api/v1/namespaces/overload/configmaps", token: controlplanetest.UserToken})
		if r.header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) == string(fs.UID) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("flow schema %s never classified a request", name)
}

// overloadNode is a node's heartbeat as a kubelet sends it: its Lease in
// kube-node-lease renewed and its Ready condition patched every second,
// as system:node:NAME in system:nodes (the admin impersonates it, so the
// requests are classified as the node's).
type overloadNode struct {
	cs     kubernetes.Interface
	name   string
	mu     sync.Mutex
	lat    []time.Duration
	errs   []error
	last   time.Time
	maxGap time.Duration
	cancel context.CancelFunc
	done   chan struct{}
}

func startOverloadNode(t testing.TB, ctx context.Context, env *controlplanetest.Env) *overloadNode {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:overload-0", Groups: []string{"system:nodes", "system:authenticated"}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &overloadNode{cs: cs, name: "overload-0", done: make(chan struct{})}
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	if _, err := env.Client.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n.name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(n.name), LeaseDurationSeconds: ptr[int32](overloadLeaseSeconds), RenewTime: &now}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	n.cancel = cancel
	n.last = time.Now()
	go func() {
		defer close(n.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
			n.beat(runCtx)
		}
	}()
	t.Cleanup(n.stop)
	return n
}

func (n *overloadNode) beat(ctx context.Context) {
	start := time.Now()
	leases := n.cs.CoordinationV1().Leases("kube-node-lease")
	l, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	if err == nil {
		l.Spec.RenewTime = ptr(metav1.NewMicroTime(time.Now()))
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err == nil {
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":%q}]}}`,
			time.Now().UTC().Format(time.RFC3339))
		_, err = n.cs.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	}
	end := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		n.errs = append(n.errs, err)
		return
	}
	n.lat = append(n.lat, end.Sub(start))
	n.maxGap = max(n.maxGap, end.Sub(n.last))
	n.last = end
}

// take returns the latencies of the renewals since the last take.
func (n *overloadNode) take() []time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := slices.Clone(n.lat)
	n.lat = nil
	return l
}

func (n *overloadNode) stop() {
	n.cancel()
	<-n.done
}
