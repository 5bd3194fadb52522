package apitest

import (
	"slices"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	typedpolicyv1 "k8s.io/client-go/kubernetes/typed/policy/v1"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func testPDB(name string, minAvailable intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		},
	}
}

// TestPodDisruptionBudget serves policy/v1 PodDisruptionBudget to
// client-go: create clears the status, the main resource keeps it and bumps
// the generation on spec changes, the status subresource writes only the
// status, and bad input is a 422 Invalid with kube's field paths that
// writes nothing.
func TestPodDisruptionBudget(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	pdbs := env.Client.PolicyV1().PodDisruptionBudgets("default")

	t.Run("discovery", func(t *testing.T) {
		l, err := env.Client.Discovery().ServerResourcesForGroupVersion("policy/v1")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range l.APIResources {
			names = append(names, r.Name)
			if r.Name == "poddisruptionbudgets" && (!r.Namespaced || r.Kind != "PodDisruptionBudget" || !slices.Equal(r.ShortNames, []string{"pdb"})) {
				t.Errorf("poddisruptionbudgets: %+v", r)
			}
		}
		if !slices.Equal(names, []string{"poddisruptionbudgets", "poddisruptionbudgets/status"}) {
			t.Errorf("policy/v1 resources %v", names)
		}
	})

	t.Run("create resets status", func(t *testing.T) {
		in := testPDB("web", intstr.FromInt32(2))
		in.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 5, ExpectedPods: 5, ObservedGeneration: 4}
		got, err := pdbs.Create(ctx, in, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != 1 || got.Status.DisruptionsAllowed != 0 || got.Status.ExpectedPods != 0 || got.Status.ObservedGeneration != 0 {
			t.Errorf("created generation %d, status %+v", got.Generation, got.Status)
		}
		read, err := pdbs.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if read.ResourceVersion != got.ResourceVersion || *read.Spec.MinAvailable != intstr.FromInt32(2) || read.Spec.Selector.MatchLabels["app"] != "web" {
			t.Errorf("read back %+v", read)
		}
	})

	t.Run("status subresource writes only the status", func(t *testing.T) {
		cur, err := pdbs.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.MinAvailable = ptr(intstr.FromString("50%"))
		cur.Status = policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3,
			Conditions: []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue,
				Reason: policyv1.SufficientPodsReason, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}},
		}
		got, err := pdbs.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.DisruptionsAllowed != 1 || got.Status.CurrentHealthy != 3 || len(got.Status.Conditions) != 1 {
			t.Errorf("status %+v", got.Status)
		}
		if *got.Spec.MinAvailable != intstr.FromInt32(2) || got.Generation != 1 {
			t.Errorf("status update changed spec or generation: %d %v", got.Generation, got.Spec.MinAvailable)
		}
	})

	t.Run("spec update keeps status and bumps generation", func(t *testing.T) {
		cur, err := pdbs.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.MinAvailable, cur.Spec.MaxUnavailable = nil, ptr(intstr.FromString("25%"))
		cur.Status.DisruptionsAllowed = 9
		got, err := pdbs.Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != 2 || got.Status.DisruptionsAllowed != 1 || got.Spec.MinAvailable != nil || *got.Spec.MaxUnavailable != intstr.FromString("25%") {
			t.Errorf("generation %d, spec %+v, status %+v", got.Generation, got.Spec, got.Status)
		}
	})

	t.Run("protobuf", func(t *testing.T) {
		pb := protobufPolicyClient(t, env).PodDisruptionBudgets("default")
		if _, err := pb.Create(ctx, testPDB("proto", intstr.FromString("100%")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := pb.Get(ctx, "proto", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *got.Spec.MinAvailable != intstr.FromString("100%") {
			t.Errorf("minAvailable %v", got.Spec.MinAvailable)
		}
		l, err := pb.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=proto"})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 1 || l.Items[0].Name != "proto" {
			t.Errorf("list by field selector: %d items", len(l.Items))
		}
	})

	t.Run("table", func(t *testing.T) {
		cols, rows := tableOf(t, env, "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web")
		if !slices.Equal(cols, []string{"Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"}) {
			t.Errorf("columns %v", cols)
		}
		if len(rows) != 1 || len(rows[0]) != 5 {
			t.Fatalf("rows %+v", rows)
		}
		cells := rows[0]
		if cells[0] != "web" || cells[1] != "N/A" || cells[2] != "25%" || cells[3] != float64(1) {
			t.Errorf("cells %v", cells)
		}
	})

	t.Run("invalid", func(t *testing.T) {
		testInvalidPDBs(t, env, pdbs)
	})
}

// testInvalidPDBs sends bad budgets and checks each answer: 422 Invalid,
// the fields kube names, and nothing written.
func testInvalidPDBs(t *testing.T, env *controlplanetest.Env, pdbs typedpolicyv1.PodDisruptionBudgetInterface) {
	ctx := ctxFor(t, 60*time.Second)
	badSelector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"bad#value"}}}}
	never := policyv1.UnhealthyPodEvictionPolicyType("Never")
	create := func(mutate func(*policyv1.PodDisruptionBudget)) func() error {
		return func() error {
			p := testPDB("bad", intstr.FromInt32(1))
			mutate(p)
			_, err := pdbs.Create(ctx, p, metav1.CreateOptions{})
			return err
		}
	}
	// update and updateStatus change the stored budget "web".
	update := func(status bool, mutate func(*policyv1.PodDisruptionBudget)) func() error {
		return func() error {
			cur, err := pdbs.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			mutate(cur)
			if status {
				_, err = pdbs.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			} else {
				_, err = pdbs.Update(ctx, cur, metav1.UpdateOptions{})
			}
			return err
		}
	}
	runInvalidCases(t, env, "policy", "PodDisruptionBudget", []invalidCase{
		{"both set", create(func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = ptr(intstr.FromInt32(1)) }),
			[]string{"spec"}},
		{"negative minAvailable", create(func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr(intstr.FromInt32(-1)) }),
			[]string{"spec.minAvailable"}},
		{"maxUnavailable over 100%", create(func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, ptr(intstr.FromString("150%"))
		}), []string{"spec.maxUnavailable"}},
		{"not a percentage", create(func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr(intstr.FromString("most")) }),
			[]string{"spec.minAvailable"}},
		{"selector label value", create(func(p *policyv1.PodDisruptionBudget) { p.Spec.Selector = badSelector }),
			[]string{"spec.selector.matchExpressions[0].values[0]"}},
		{"unhealthy pod eviction policy", create(func(p *policyv1.PodDisruptionBudget) { p.Spec.UnhealthyPodEvictionPolicy = &never }),
			[]string{"spec.unhealthyPodEvictionPolicy"}},
		{"update to both set", update(false, func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr(intstr.FromInt32(1)) }),
			[]string{"spec"}},
		{"negative status counts", update(true, func(p *policyv1.PodDisruptionBudget) {
			p.Status.DisruptionsAllowed, p.Status.ExpectedPods = -1, -2
		}), []string{"status.disruptionsAllowed", "status.expectedPods"}},
		{"condition status", update(true, func(p *policyv1.PodDisruptionBudget) { p.Status.Conditions[0].Status = "Maybe" }),
			[]string{"status.conditions[0].status"}},
	})
	if _, err := pdbs.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of a refused budget: %v, want NotFound", err)
	}
}

// protobufPolicyClient is a policy/v1 client that sends and accepts
// protobuf, as controllers configure theirs.
func protobufPolicyClient(t *testing.T, env *controlplanetest.Env) typedpolicyv1.PolicyV1Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs.PolicyV1()
}
