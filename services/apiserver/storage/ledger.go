package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"

	"github.com/cairn-dev/cairn/schemas/fit"
)

// The encoding of a ledger. A binding rewrites the whole ledger of its node,
// so its size and the cost of encoding it grow with the pods on the node;
// JSON (the first format, still decoded) took ~130 bytes a pod, this one
// ~40 and no reflection:
//
//	0x00 'A' 0x02                      magic (JSON never starts with 0x00), version 2
//	uvarint n, n bytes                 prefix common to every pod key
//	then per pod, to the end:
//	uvarint n, n bytes                 pod key without the prefix
//	uvarint 2n+1, n bytes              pod uid, or
//	uvarint 2*16, 16 bytes             a uid in the canonical UUID form, in binary
//	varint, varint, varint             requests: milli-cpu, memory, ephemeral storage
var ledgerMagic = []byte{0x00, 'A', 0x02}

// podKeyPrefix is the prefix of every pod key.
var podKeyPrefix = Key("", "pods", "", "")

// EncodeAllocation encodes a ledger (its Revision is not stored).
func EncodeAllocation(a Allocation) []byte {
	prefix := podKeyPrefix
	size := len(ledgerMagic) + 1 + len(prefix)
	for k := range a.Pods {
		if !strings.HasPrefix(k, prefix) {
			prefix = ""
		}
		size += len(k) + 16 + 2 + 3*binary.MaxVarintLen64/2
	}
	b := make([]byte, 0, size)
	b = append(b, ledgerMagic...)
	b = appendString(b, prefix)
	for k, p := range a.Pods {
		b = appendString(b, k[len(prefix):])
		b = appendUID(b, p.UID)
		b = binary.AppendVarint(b, p.Requests.MilliCPU)
		b = binary.AppendVarint(b, p.Requests.Memory)
		b = binary.AppendVarint(b, p.Requests.EphemeralStorage)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendUID appends a uid: 16 bytes if it is a UUID in canonical form
// (lower-case hex, 8-4-4-4-12), which it is when the apiserver made it.
func appendUID(b []byte, uid string) []byte {
	if raw, ok := parseUUID(uid); ok {
		b = binary.AppendUvarint(b, 2*16)
		return append(b, raw[:]...)
	}
	b = binary.AppendUvarint(b, 2*uint64(len(uid))+1)
	return append(b, uid...)
}

func parseUUID(s string) (raw [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return raw, false
	}
	j := 0
	for i := 0; i < 36; i += 2 {
		if s[i] == '-' {
			i-- // the pair starts after the dash
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return raw, false
		}
		raw[j] = hi<<4 | lo
		j++
	}
	return raw, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func formatUUID(raw []byte) string {
	const digits = "0123456789abcdef"
	var s [36]byte
	j := 0
	for i, c := range raw {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			s[j] = '-'
			j++
		}
		s[j], s[j+1] = digits[c>>4], digits[c&0xf]
		j += 2
	}
	return string(s[:])
}

var errBadLedger = errors.New("malformed ledger")

// DecodeAllocation decodes a ledger written by EncodeAllocation or, by an
// earlier version, as JSON. Pods is never nil.
func DecodeAllocation(b []byte) (Allocation, error) {
	a := Allocation{}
	if len(b) == 0 || b[0] != 0 {
		if err := json.Unmarshal(b, &a); err != nil {
			return Allocation{}, err
		}
		if a.Pods == nil {
			a.Pods = map[string]AllocatedPod{}
		}
		return a, nil
	}
	if len(b) < len(ledgerMagic) || string(b[:len(ledgerMagic)]) != string(ledgerMagic) {
		return Allocation{}, errBadLedger
	}
	d := ledgerDecoder{b: b[len(ledgerMagic):]}
	prefix := d.string()
	a.Pods = map[string]AllocatedPod{}
	for d.err == nil && len(d.b) > 0 {
		key := prefix + d.string()
		p := AllocatedPod{UID: d.uid()}
		p.Requests = fit.Resources{MilliCPU: d.varint(), Memory: d.varint(), EphemeralStorage: d.varint()}
		a.Pods[key] = p
	}
	if d.err != nil {
		return Allocation{}, d.err
	}
	return a, nil
}

type ledgerDecoder struct {
	b   []byte
	err error
}

func (d *ledgerDecoder) string() string {
	n, w := binary.Uvarint(d.b)
	if w <= 0 || uint64(len(d.b)-w) < n {
		d.fail()
		return ""
	}
	s := string(d.b[w : w+int(n)])
	d.b = d.b[w+int(n):]
	return s
}

func (d *ledgerDecoder) uid() string {
	n, w := binary.Uvarint(d.b)
	if w <= 0 || uint64(len(d.b)-w) < n/2 {
		d.fail()
		return ""
	}
	raw := d.b[w : w+int(n/2)]
	d.b = d.b[w+int(n/2):]
	if n%2 == 1 {
		return string(raw)
	}
	if len(raw) != 16 {
		d.fail()
		return ""
	}
	return formatUUID(raw)
}

func (d *ledgerDecoder) varint() int64 {
	v, w := binary.Varint(d.b)
	if w <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[w:]
	return v
}

func (d *ledgerDecoder) fail() {
	if d.err == nil {
		d.err = errBadLedger
	}
	d.b = nil
}
