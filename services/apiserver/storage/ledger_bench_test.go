package storage

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/schemas/fit"
)

func benchLedger(n int) Allocation {
	a := Allocation{Pods: map[string]AllocatedPod{}}
	for i := range n {
		a.Pods[Key("", "pods", "default", fmt.Sprintf("pod-%05d", i))] = AllocatedPod{
			UID: fmt.Sprintf("0b6a1c2e-3f4d-4e5f-8a9b-%012d", i), Requests: fit.Resources{MilliCPU: 100, Memory: 100 << 20}}
	}
	return a
}

// BenchmarkLedger compares the encodings of a ledger of 100 pods.
func BenchmarkLedger(b *testing.B) {
	a := benchLedger(100)
	js, _ := json.Marshal(a)
	bin := EncodeAllocation(a)
	b.Run("EncodeJSON", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(a)
		}
		b.ReportMetric(float64(len(js)), "bytes")
	})
	b.Run("EncodeV2", func(b *testing.B) {
		for b.Loop() {
			EncodeAllocation(a)
		}
		b.ReportMetric(float64(len(bin)), "bytes")
	})
	b.Run("DecodeJSON", func(b *testing.B) {
		for b.Loop() {
			DecodeAllocation(js)
		}
	})
	b.Run("DecodeV2", func(b *testing.B) {
		for b.Loop() {
			DecodeAllocation(bin)
		}
	})
}
