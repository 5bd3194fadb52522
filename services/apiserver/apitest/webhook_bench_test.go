package apitest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// webhookBenchPods is how many pods each round creates.
const webhookBenchPods = 2000

// BenchmarkWebhookLatency measures what one mutating webhook (a real HTTPS
// server on loopback answering a JSONPatch that adds a label) adds to pod
// creates through the full path: on one control plane, after a warm-up
// round, four rounds without, with, with, without the webhook (its
// configuration created and deleted between rounds), so both see the same
// machine load. It reports p50 and p99 of each, the p50 the webhook adds,
// and the ratio of the rates. Run it with -benchtime=1x (go tool task
// bench:authz).
func BenchmarkWebhookLatency(b *testing.B) {
	for i := 0; i < b.N; i++ {
		env := controlplanetest.Start(b, controlplanetest.Options{Fsync: true})
		hook := startBenchHook(b)
		api := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
		var lat [2][]time.Duration
		var took [2]time.Duration
		createPodsAs(b, env, controlplanetest.AdminToken, "default", "warm", webhookBenchPods/4)
		for round, with := range []bool{false, true, true, false} {
			m := 0
			if with {
				m = 1
				c, err := api.Create(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{
					ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Webhooks: []admissionregistrationv1.MutatingWebhook{hook}}, metav1.CreateOptions{})
				if err != nil {
					b.Fatal(err)
				}
				controlplanetest.Eventually(b, time.Minute, "bench webhook loaded", func() bool { return env.Webhooks.Loaded(true, "bench", c.ResourceVersion) })
			}
			l, d := createPodsAs(b, env, controlplanetest.AdminToken, "default", fmt.Sprintf("r%d", round), webhookBenchPods)
			lat[m] = append(lat[m], l...)
			took[m] += d
			if with {
				if err := api.Delete(context.Background(), "bench", metav1.DeleteOptions{}); err != nil {
					b.Fatal(err)
				}
				controlplanetest.Eventually(b, time.Minute, "bench webhook gone", func() bool { return !env.Webhooks.Loaded(true, "bench", "") })
			}
		}
		q := func(m, pct int) time.Duration {
			slices.Sort(lat[m])
			return lat[m][len(lat[m])*pct/100]
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		rate := func(m int) float64 { return float64(len(lat[m])) / took[m].Seconds() }
		b.ReportMetric(ms(q(0, 50)), "plain-p50-ms")
		b.ReportMetric(ms(q(0, 99)), "plain-p99-ms")
		b.ReportMetric(ms(q(1, 50)), "webhook-p50-ms")
		b.ReportMetric(ms(q(1, 99)), "webhook-p99-ms")
		b.ReportMetric(ms(q(1, 50)-q(0, 50)), "added-p50-ms")
		b.ReportMetric(rate(1)/rate(0), "rate-ratio")
		b.Logf("%d creates each, %d clients: without a webhook p50 %v p99 %v (%.0f/s); with one mutating webhook p50 %v p99 %v (%.0f/s)",
			len(lat[0]), authzClients, q(0, 50), q(0, 99), rate(0), q(1, 50), q(1, 99), rate(1))
	}
}

// startBenchHook starts the webhook server and returns its webhook.
func startBenchHook(b *testing.B) admissionregistrationv1.MutatingWebhook {
	h := startHookTB(b, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return patchResponse(`[{"op":"add","path":"/metadata/labels","value":{"webhook":"bench"}}]`)
	})
	return mutatingHook("bench.cairn.test", h)
}
