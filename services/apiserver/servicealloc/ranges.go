package servicealloc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/schemas"
)

// Default ranges, as kube-apiserver's.
const (
	DefaultClusterIPRange = schemas.DefaultClusterIPRange
	DefaultNodePortRange  = "30000-32767"
)

// IPRange is the IPv4 addresses of a CIDR but its network and broadcast
// addresses (all of them for a /31 or /32). The zero value is empty.
type IPRange struct {
	prefix netip.Prefix
	base   uint32 // first usable address
	size   int
}

// ParseIPRange parses a service CIDR. Only IPv4 ranges are supported.
func ParseIPRange(cidr string) (IPRange, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return IPRange{}, fmt.Errorf("servicealloc: service CIDR %q: %w", cidr, err)
	}
	if !p.Addr().Is4() {
		return IPRange{}, fmt.Errorf("servicealloc: service CIDR %q: only IPv4 ranges are supported", cidr)
	}
	if p.Bits() < 8 {
		// kube limits a range to 2^20 addresses for its bitmap; cairn
		// keeps keys, but a /7 is as surely a mistake.
		return IPRange{}, fmt.Errorf("servicealloc: service CIDR %q is too large", cidr)
	}
	p = p.Masked()
	a := p.Addr().As4()
	first := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	total := 1 << (32 - p.Bits())
	r := IPRange{prefix: p, base: first, size: total}
	if total > 2 {
		r.base, r.size = first+1, total-2
	}
	return r, nil
}

// MustParseIPRange is ParseIPRange for constants; it panics on error.
func MustParseIPRange(cidr string) IPRange {
	r, err := ParseIPRange(cidr)
	if err != nil {
		panic(err)
	}
	return r
}

// String is the CIDR, as kube prints it in errors.
func (r IPRange) String() string { return r.prefix.String() }

// Size is the number of allocatable addresses.
func (r IPRange) Size() int { return r.size }

// At is the i-th allocatable address.
func (r IPRange) At(i int) netip.Addr {
	v := r.base + uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Offset is ip's index in the range, ok=false if it is not allocatable.
func (r IPRange) Offset(ip netip.Addr) (int, bool) {
	ip = ip.Unmap()
	if !ip.Is4() || !r.prefix.Contains(ip) {
		return 0, false
	}
	a := ip.As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	if v < r.base || int(v-r.base) >= r.size {
		return 0, false
	}
	return int(v - r.base), true
}

// staticBand is how many addresses at the start of the range random
// allocation leaves to requested ones while it can (kube's
// calculateRangeOffset: min(max(16, size/16), 256); none below 16).
func (r IPRange) staticBand() int {
	const lo, hi, step = 16, 256, 16
	if r.size < lo {
		return 0
	}
	return min(max(lo, r.size/step), hi)
}

// PortRange is a range of node ports, Base to Base+Size-1.
type PortRange struct {
	Base, Size int
}

// ParsePortRange parses "30000-32767" (or a single port), as kube's
// net.ParsePortRange.
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		hi = lo
	}
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if err := errors.Join(err1, err2); err != nil {
		return PortRange{}, fmt.Errorf("servicealloc: port range %q: %w", s, err)
	}
	if a < 1 || b > 65535 || a > b {
		return PortRange{}, fmt.Errorf("servicealloc: port range %q: want 1 <= low <= high <= 65535", s)
	}
	return PortRange{Base: a, Size: b - a + 1}, nil
}

// MustParsePortRange is ParsePortRange for constants; it panics on error.
func MustParsePortRange(s string) PortRange {
	r, err := ParsePortRange(s)
	if err != nil {
		panic(err)
	}
	return r
}

// String is "30000-32767", as kube prints the range in errors.
func (r PortRange) String() string {
	if r.Size == 0 {
		return ""
	}
	return fmt.Sprintf("%d-%d", r.Base, r.Base+r.Size-1)
}

// Contains reports whether port is in the range.
func (r PortRange) Contains(port int) bool { return port >= r.Base && port < r.Base+r.Size }

// pick chooses a free offset in [from, to) at random: a random start,
// then the first free offset from there on, wrapping around (the random
// scan of kube's allocation bitmap). ok=false when every offset is taken.
func pick(from, to int, taken func(int) bool) (int, bool) {
	n := to - from
	if n <= 0 {
		return 0, false
	}
	start := rand.IntN(n)
	for i := range n {
		off := from + (start+i)%n
		if !taken(off) {
			return off, true
		}
	}
	return 0, false
}
