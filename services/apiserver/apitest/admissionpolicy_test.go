package apitest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// replicasPolicy refuses Deployments with more than max replicas (a
// param's data.max when params is set).
func replicasPolicy(name string, withParams bool) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5", Message: "replicas must be no greater than 5"}},
		},
	}
	if withParams {
		p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		p.Spec.Validations = []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= int(params.data.max)",
			MessageExpression: "'replicas must be no greater than ' + params.data.max"}}
	}
	return p
}

// TestValidatingAdmissionPolicyAPI: policies and bindings are served with
// kube's defaults, validation (422 with a cause per field, CEL compile
// errors included, nothing written) and table columns; the status
// subresource keeps the spec.
func TestValidatingAdmissionPolicyAPI(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	policies := env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()

	bad := replicasPolicy("bad", false)
	bad.Spec.Validations = append(bad.Spec.Validations,
		admissionregistrationv1.Validation{Expression: "object.spec.replicas <"},
		admissionregistrationv1.Validation{Expression: "params.x == 1"}, // no paramKind
		admissionregistrationv1.Validation{Expression: "true", Reason: ptr(metav1.StatusReasonConflict)})
	bad.Spec.FailurePolicy = ptr(admissionregistrationv1.FailurePolicyType("Sometimes"))
	bad.Spec.Variables = []admissionregistrationv1.Variable{{Name: "9lives", Expression: "1"}}
	wantInvalid(t, env, "admissionregistration.k8s.io", "ValidatingAdmissionPolicy",
		[]string{"spec.failurePolicy", "spec.validations[1].expression", "spec.validations[2].expression", "spec.validations[3].reason", "spec.variables[0].name"},
		func() error { _, err := policies.Create(ctx, bad, metav1.CreateOptions{}); return err })
	wantInvalid(t, env, "admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding",
		[]string{"spec.paramRef", "spec.policyName", "spec.validationActions"}, func() error {
			_, err := bindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
					ParamRef: &admissionregistrationv1.ParamRef{ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)}}}, metav1.CreateOptions{})
			return err
		})

	p, err := policies.Create(ctx, replicasPolicy("max-replicas", true), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *p.Spec.FailurePolicy != admissionregistrationv1.Fail || *p.Spec.MatchConstraints.MatchPolicy != admissionregistrationv1.Equivalent ||
		p.Spec.MatchConstraints.NamespaceSelector == nil || *p.Spec.MatchConstraints.ResourceRules[0].Scope != admissionregistrationv1.AllScopes || p.Generation != 1 {
		t.Errorf("defaults %+v", p.Spec)
	}
	if _, err := bindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "max-replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "max-replicas",
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default", ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cols, rows := tableOf(t, env, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies")
	if strings.Join(cols, " ") != "Name Validations ParamKind Age" || len(rows) != 1 || rows[0][1] != float64(1) || rows[0][2] != "v1/ConfigMap" {
		t.Errorf("policy table %v %v", cols, rows)
	}
	cols, rows = tableOf(t, env, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings")
	if strings.Join(cols, " ") != "Name PolicyName ParamRef Age" || len(rows) != 1 || rows[0][1] != "max-replicas" || rows[0][2] != "default/limits" {
		t.Errorf("binding table %v %v", cols, rows)
	}

	// The status subresource writes status only.
	p.Status.ObservedGeneration = 1
	p.Spec.Validations = nil
	st, err := policies.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.ObservedGeneration != 1 || len(st.Spec.Validations) != 1 {
		t.Errorf("after a status write: %+v", st)
	}
}

// bindPolicy binds policy with actions (and a ConfigMap param in
// default, if param is set) and waits until a Deployment of 10 replicas
// in default is refused, or warned about.
func bindPolicy(t *testing.T, env *controlplanetest.Env, policy, param string, actions ...admissionregistrationv1.ValidationAction) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy, ValidationActions: actions}}
	if param != "" {
		b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: param, Namespace: "default", ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)}
	}
	if _, err := env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestValidatingAdmissionPolicy: policies evaluated by k8s.io/apiserver's
// plugin refuse with kube's message and code and write nothing (Deny),
// warn (Warn), read their params from a ConfigMap, and honour
// matchConditions and namespaceSelector.
func TestValidatingAdmissionPolicy(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 120*time.Second)
	policies := env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	deployments := env.Client.AppsV1().Deployments("default")

	p := replicasPolicy("max-replicas", false)
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-exempt", Expression: "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"}}
	p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}}}}
	if _, err := policies.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindPolicy(t, env, "max-replicas", "", admissionregistrationv1.Deny)
	const want = "deployments.apps \"big\" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' denied request: replicas must be no greater than 5"
	deadline := time.Now().Add(60 * time.Second)
	for {
		before := settle(t, env)
		_, err := deployments.Create(ctx, testDeployment("big", 10), metav1.CreateOptions{})
		if err != nil {
			if !apierrors.IsInvalid(err) || err.Error() != want { // reason Invalid (422) unless the validation names another
				t.Fatalf("got %v, want 422 %q", err, want)
			}
			requireNothingWritten(t, env, before)
			break
		}
		if err := deployments.Delete(ctx, "big", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the policy never took effect")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Within the limit, exempt by matchCondition, or outside the
	// namespaces selected: allowed.
	if _, err := deployments.Create(ctx, testDeployment("small", 3), metav1.CreateOptions{}); err != nil {
		t.Errorf("3 replicas: %v", err)
	}
	exempt := testDeployment("exempt", 10)
	exempt.Labels = map[string]string{"exempt": "yes"}
	if _, err := deployments.Create(ctx, exempt, metav1.CreateOptions{}); err != nil {
		t.Errorf("exempt: %v", err)
	}
	if _, err := env.Client.AppsV1().Deployments("kube-system").Create(ctx, testDeployment("system", 10), metav1.CreateOptions{}); err != nil {
		t.Errorf("kube-system: %v", err)
	}

	// Warn: the write goes through with kube's warning.
	pw := replicasPolicy("warn-replicas", false)
	pw.Spec.Validations[0].Expression = "object.spec.replicas <= 2"
	pw.Spec.Validations[0].Message = "more than 2 replicas"
	pw.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "replicas", ValueExpression: "string(object.spec.replicas)"}}
	if _, err := policies.Create(ctx, pw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindPolicy(t, env, "warn-replicas", "", admissionregistrationv1.Warn, admissionregistrationv1.Audit)
	const wantWarning = "Validation failed for ValidatingAdmissionPolicy 'warn-replicas' with binding 'warn-replicas': more than 2 replicas"
	deadline = time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		mark := settle(t, env)
		name := fmt.Sprintf("warned-%d", i)
		r := do(t, env, call{method: http.MethodPost, path: "/apis/apps/v1/namespaces/default/deployments",
			body: mustJSON(t, testDeployment(name, 4))})
		if r.code != http.StatusCreated {
			t.Fatalf("warned create: %d %s", r.code, truncate(r.body))
		}
		if ws := r.header.Values("Warning"); len(ws) > 0 {
			if !strings.Contains(ws[0], wantWarning) {
				t.Errorf("warning %q, want %q", ws, wantWarning)
			}
			// Audit: the event of the write carries the policy's audit
			// annotation and kube's validation_failure record.
			var found bool
			for _, ev := range eventsSince(t, env, mark) {
				if ev.Resource != "deployments" || ev.Name != name {
					continue
				}
				found = true
				if ev.Admission == nil || ev.Admission.Annotations["warn-replicas/replicas"] != "4" ||
					!strings.Contains(ev.Admission.Annotations["validation.policy.admission.k8s.io/validation_failure"], `"validationActions":["Warn","Audit"]`) {
					t.Errorf("event admission %+v", ev.Admission)
				}
			}
			if !found {
				t.Error("no event for the deployment")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the warning policy never took effect")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Params from a ConfigMap, in messageExpression too.
	if _, err := env.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits"},
		Data: map[string]string{"max": "7"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pp := replicasPolicy("param-replicas", true)
	pp.Spec.MatchConstraints.ResourceRules[0].Rule.Resources = []string{"replicasets"}
	if _, err := policies.Create(ctx, pp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindPolicy(t, env, "param-replicas", "limits", admissionregistrationv1.Deny)
	rs := func(name string, n int32) *appsv1.ReplicaSet {
		d := testDeployment(name, n)
		return &appsv1.ReplicaSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.ReplicaSetSpec{Replicas: &n, Selector: d.Spec.Selector, Template: d.Spec.Template}}
	}
	const wantParam = "ValidatingAdmissionPolicy 'param-replicas' with binding 'param-replicas' denied request: replicas must be no greater than 7"
	deadline = time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		_, err := env.Client.AppsV1().ReplicaSets("default").Create(ctx, rs(fmt.Sprintf("rs-%d", i), 8), metav1.CreateOptions{})
		if err != nil {
			if !strings.Contains(err.Error(), wantParam) {
				t.Fatalf("got %v, want %q", err, wantParam)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the param policy never took effect")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := env.Client.AppsV1().ReplicaSets("default").Create(ctx, rs("rs-ok", 7), metav1.CreateOptions{}); err != nil {
		t.Errorf("7 replicas: %v", err)
	}

	// A param that does not exist, parameterNotFoundAction Deny: every
	// matching request is refused.
	pm := replicasPolicy("missing-param", true)
	pm.Spec.MatchConstraints.ResourceRules[0].Rule.Resources = []string{"statefulsets"}
	if _, err := policies.Create(ctx, pm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindPolicy(t, env, "missing-param", "nowhere", admissionregistrationv1.Deny)
	deadline = time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		d := testDeployment(fmt.Sprintf("sts-%d", i), 1)
		sts := &appsv1.StatefulSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.StatefulSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template}}
		_, err := env.Client.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{})
		if err != nil {
			if !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'missing-param' with binding 'missing-param' denied request") ||
				!strings.Contains(err.Error(), "no params found") {
				t.Fatalf("got %v, want a refusal for the missing param", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the missing-param policy never took effect")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
