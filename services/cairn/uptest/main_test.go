package uptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/embedded"
)

// The roles this test binary plays as a child of BenchmarkUp, chosen by
// CAIRN_UPBENCH_ROLE; the other CAIRN_UPBENCH_ variables are its input,
// and its one line of JSON on stdout (a result) its output.
const (
	roleEtcd   = "etcd"   // serve an etcd member until SIGTERM
	rolePut    = "put"    // raw puts into that etcd
	roleCreate = "create" // pod creates through the apiserver
)

// result is what a load process did: when it started and ended, and the
// latency of each operation (nanoseconds).
type result struct {
	Start, End time.Time
	Latencies  []int64
	Errors     int
	FirstError string
}

func TestMain(m *testing.M) {
	role := os.Getenv("CAIRN_UPBENCH_ROLE")
	if role == "" {
		os.Exit(m.Run())
	}
	if err := runRole(role); err != nil {
		fmt.Fprintf(os.Stderr, "uptest %s: %v\n", role, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runRole(role string) error {
	switch role {
	case roleEtcd:
		return serveEtcd(os.Getenv("CAIRN_UPBENCH_DIR"), os.Getenv("CAIRN_UPBENCH_ADDR"))
	case rolePut, roleCreate:
		n, err := strconv.Atoi(os.Getenv("CAIRN_UPBENCH_N"))
		if err != nil {
			return fmt.Errorf("CAIRN_UPBENCH_N: %w", err)
		}
		clients, err := strconv.Atoi(os.Getenv("CAIRN_UPBENCH_CLIENTS"))
		if err != nil {
			return fmt.Errorf("CAIRN_UPBENCH_CLIENTS: %w", err)
		}
		target, prefix := os.Getenv("CAIRN_UPBENCH_TARGET"), os.Getenv("CAIRN_UPBENCH_PREFIX")
		var op func(client int) (func(i int) error, error)
		if role == rolePut {
			op = putOp(target, prefix)
		} else {
			op = createOp(target, prefix, os.Getenv("CAIRN_UPBENCH_CODEC"))
		}
		r, err := drive(n, clients, op)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	return fmt.Errorf("unknown role %q", role)
}

// serveEtcd runs an fsync'd etcd member (as cairn up's embedded one) until
// SIGTERM, after printing its endpoint.
func serveEtcd(dir, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := embedded.StartEtcd(ctx, embedded.EtcdConfig{Dir: dir, ClientAddr: addr})
	if err != nil {
		return err
	}
	defer e.Close()
	fmt.Println(e.Endpoint())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}

// drive runs n operations over clients clients, each made by op once; it
// keeps going after an error and counts it.
func drive(n, clients int, op func(client int) (func(i int) error, error)) (result, error) {
	ops := make([]func(int) error, clients)
	for c := range ops {
		f, err := op(c)
		if err != nil {
			return result{}, err
		}
		ops[c] = f
	}
	r := result{Latencies: make([]int64, n)}
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	r.Start = time.Now()
	for _, f := range ops {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				err := f(i)
				r.Latencies[i] = int64(time.Since(t0))
				if err != nil {
					mu.Lock()
					if r.Errors++; r.FirstError == "" {
						r.FirstError = err.Error()
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	r.End = time.Now()
	return r, nil
}

// putOp puts values of CAIRN_UPBENCH_SIZE bytes under prefix, one etcd
// client (one connection) per writer.
func putOp(endpoint, prefix string) func(int) (func(int) error, error) {
	size, _ := strconv.Atoi(os.Getenv("CAIRN_UPBENCH_SIZE"))
	val := string(make([]byte, size))
	return func(int) (func(int) error, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second,
			MaxCallSendMsgSize: embedded.MaxRequestBytes})
		if err != nil {
			return nil, err
		}
		return func(i int) error {
			_, err := cli.Put(context.Background(), fmt.Sprintf("%s%08d", prefix, i), val)
			return err
		}, nil
	}
}

// createOp creates pods named prefix-N through the kubeconfig's apiserver
// in codec ("protobuf" or "json"), one client-go clientset (one
// connection) per client, without client-side rate limits.
func createOp(kubeconfig, prefix, codec string) func(int) (func(int) error, error) {
	return func(int) (func(int) error, error) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, err
		}
		cfg.QPS, cfg.Burst = -1, 0
		if codec == "protobuf" {
			cfg.ContentType = "application/vnd.kubernetes.protobuf"
			cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		}
		// A Dial of its own keeps client-go from sharing one cached
		// transport between the clientsets.
		cfg = rest.CopyConfig(cfg)
		cfg.Dial = (&net.Dialer{}).DialContext
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return func(i int) error {
			_, err := cs.CoreV1().Pods("default").Create(context.Background(), benchPod(fmt.Sprintf("%s-%06d", prefix, i)), metav1.CreateOptions{})
			return err
		}, nil
	}
}

// benchPod is the pod every create sends: the same as bench:api's.
func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36",
			Command: []string{"sleep", "3600"}}}},
	}
}
