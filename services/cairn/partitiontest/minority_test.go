package partitiontest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"k": name}}
}

func create(ctx context.Context, cs *kubernetes.Clientset, name string) error {
	_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap(name), metav1.CreateOptions{})
	return err
}

// TestMinorityRefusesWrites: see the package documentation.
func TestMinorityRefusesWrites(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s1, s3 := c.servers[0], c.servers[2]
	// The client's own timeout is well above the apiserver's: an answer
	// must come from the server, not from the client giving up.
	major, minor := s1.client(t, 90*time.Second), s3.client(t, 90*time.Second)
	for i, s := range c.servers {
		if err := create(ctx, s.client(t, 30*time.Second), fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatalf("write through %s: %v", s.name, err)
		}
	}

	s3.host.Cut()
	cut := time.Now()
	// The majority elects an etcd leader (s3's member may have led) and
	// goes on accepting writes.
	var majority []string
	for i := 0; len(majority) < 3; i++ {
		name := fmt.Sprintf("majority-%d", i)
		err := create(ctx, major, name)
		if err == nil {
			majority = append(majority, name)
			continue
		}
		if time.Since(cut) > time.Minute {
			t.Fatalf("the majority accepts no write a minute after the cut: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("majority: first write accepted %v after the cut", time.Since(cut).Round(10*time.Millisecond))

	var refused []string
	for i := range 2 {
		name := fmt.Sprintf("minority-%d", i)
		start := time.Now()
		err := create(ctx, minor, name)
		if err == nil {
			t.Fatalf("a write through %s, cut off from the majority, was accepted", s3.name)
		}
		st, ok := err.(apierrors.APIStatus)
		if !ok || st.Status().Code < 500 {
			t.Fatalf("write through the cut-off %s: %v (%T), want a 5xx Status", s3.name, err, err)
		}
		t.Logf("cut-off %s refused a write after %v: %d %s: %s", s3.name, time.Since(start).Round(10*time.Millisecond),
			st.Status().Code, st.Status().Reason, st.Status().Message)
		refused = append(refused, name)
	}

	s3.host.Heal()
	healed := time.Now()
	for i := 0; ; i++ {
		err := create(ctx, minor, fmt.Sprintf("after-%d", i))
		if err == nil {
			break
		}
		if time.Since(healed) > 2*time.Minute {
			t.Fatalf("%s accepts no write two minutes after the heal: %v", s3.name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("healed %s: first write accepted %v after the heal", s3.name, time.Since(healed).Round(10*time.Millisecond))

	// What was acknowledged is there, through the healed server too;
	// nothing that was refused is.
	for _, name := range append(majority, "before-0", "before-1", "before-2") {
		if _, err := minor.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("acknowledged %s through %s: %v", name, s3.name, err)
		}
	}
	// A refused write timed out (etcd's "request timed out", the
	// apiserver's 504): that says the outcome is unknown, not that it
	// failed, and the cut-off member may have passed it on to the leader
	// once healed. Either outcome is allowed, as a Kubernetes client must
	// assume; but every server must tell the same.
	for _, name := range refused {
		_, errMajor := major.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
		_, errMinor := minor.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
		switch {
		case errMajor == nil && errMinor == nil:
			t.Logf("refused (timed out) write %s was committed after all", name)
		case apierrors.IsNotFound(errMajor) && apierrors.IsNotFound(errMinor):
			t.Logf("refused (timed out) write %s was not committed", name)
		default:
			t.Errorf("refused write %s: through %s %v, through %s %v: the servers disagree", name, s1.name, errMajor, s3.name, errMinor)
		}
	}
	c.verify(ctx, s1)
}
