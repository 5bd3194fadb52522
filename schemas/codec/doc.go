// Package codec encodes and decodes JSON with the semantics Kubernetes uses
// for API objects, about two to three times faster than encoding/json.
//
// It is built on github.com/go-json-experiment/json, the prototype of Go's
// encoding/json/v2, configured to behave as the decoder of
// k8s.io/apimachinery (sigs.k8s.io/json's UnmarshalCaseSensitivePreserveInts)
// and the encoder of encoding/json:
//
//   - member names match case-sensitively; unknown members are ignored;
//   - a name that appears twice keeps its last value;
//   - invalid UTF-8 in strings is replaced by U+FFFD;
//   - UnmarshalJSON and MarshalJSON methods (metav1.Time,
//     resource.Quantity, intstr.IntOrString, ...) are called as encoding/json
//     calls them;
//   - Marshal writes the bytes encoding/json.Marshal writes (sorted map keys,
//     HTML-safe escaping, omitempty as v1 defines it).
//
// Use it for JSON that cairn's components wrote: objects read back from
// etcd, events read from the log. Untrusted request bodies keep going
// through the apiserver's decoder, whose error messages and strict field
// validation are Kubernetes'. Values that hold interface{} numbers
// (unstructured objects) are not for this package: it decodes them as
// float64, where apimachinery keeps integers as int64.
//
// The tests compare every function with the decoder or encoder it stands
// in for, on real API objects and on fuzzed input.
package codec
