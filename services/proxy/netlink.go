package proxy

import (
	"encoding/binary"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// netlinkWriter writes an incremental Sync as one netlink batch, which the
// kernel applies atomically, as it does nft's. Unlike nft, which first
// dumps the whole ruleset into its cache (a cost that grows with the
// number of Services: doc.go, Cost), the batch holds only the changed
// objects, and the kernel resolves the names of chains, sets and maps
// itself. The rules are the same strings nft reads (rules.go); each is
// translated into the expressions nft would generate for it, and a rule of
// a shape not known here fails the Sync (the next one is full, via nft).
type netlinkWriter struct {
	netns string
}

// write applies the plans, the hairpin sets' changes and the deletion of
// the tables gone (after them) in one batch and returns its operation
// count.
func (w *netlinkWriter) write(plans []*plan, hairpin map[string]*setChange, gone []string) (int, error) {
	conn, closeConn, err := nlConn(w.netns)
	if err != nil {
		return 0, err
	}
	defer closeConn()
	state := &nlState{conn: conn}
	tables := map[string]*nlBatch{}
	writePlans(plans, hairpin, func(table string) tableWriter {
		b := tables[table]
		if b == nil {
			b = &nlBatch{nlState: state, table: &nftables.Table{Name: table, Family: nftables.TableFamilyIPv4}}
			tables[table] = b
		}
		return b
	})
	for _, name := range gone {
		state.ops++
		conn.DelTable(&nftables.Table{Name: name, Family: nftables.TableFamilyIPv4})
	}
	if state.err != nil {
		return 0, state.err
	}
	if state.ops == 0 {
		return 0, nil
	}
	if err := conn.Flush(); err != nil {
		return 0, fmt.Errorf("netlink: %w", err)
	}
	return state.ops, nil
}

// nlState is one batch on one nftables.Conn; the first error sticks.
type nlState struct {
	conn *nftables.Conn
	ops  int
	err  error
}

// nlBatch is a tableWriter into a batch, for one table.
type nlBatch struct {
	*nlState
	table *nftables.Table
}

var _ tableWriter = (*nlBatch)(nil)

func (b *nlState) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *nlBatch) chain(name string) *nftables.Chain {
	return &nftables.Chain{Name: name, Table: b.table}
}

func (b *nlBatch) deleteElement(e element) {
	key, err := elementKey(e)
	if err != nil {
		b.fail(err)
		return
	}
	b.ops++
	b.fail(b.conn.SetDeleteElements(&nftables.Set{Table: b.table, Name: e.Map}, []nftables.SetElement{{Key: key}}))
}

func (b *nlBatch) addElement(e element) {
	key, err := elementKey(e)
	if err != nil {
		b.fail(err)
		return
	}
	v, err := verdict(e.Value)
	if err != nil {
		b.fail(err)
		return
	}
	b.ops++
	set := &nftables.Set{Table: b.table, Name: e.Map, IsMap: true, DataType: nftables.TypeVerdict}
	b.fail(b.conn.SetAddElements(set, []nftables.SetElement{{Key: key, VerdictData: v}}))
}

// addSet adds an affinity set: ipv4 addresses, dynamic, with a timeout.
func (b *nlBatch) addSet(s knftables.Set) {
	if s.Type != "ipv4_addr" {
		b.fail(fmt.Errorf("netlink: set %s of type %q", s.Name, s.Type))
		return
	}
	set := &nftables.Set{Table: b.table, Name: s.Name, KeyType: nftables.TypeIPAddr}
	for _, f := range s.Flags {
		switch f {
		case knftables.DynamicFlag:
			set.Dynamic = true
		case knftables.TimeoutFlag:
			set.HasTimeout = true
		default:
			b.fail(fmt.Errorf("netlink: set %s flag %q", s.Name, f))
		}
	}
	if s.Timeout != nil {
		set.Timeout = *s.Timeout
	}
	b.ops++
	b.fail(b.conn.AddSet(set, nil))
}

// addSetElement and deleteSetElement change a named set of concatenated
// IPv4 addresses (the hairpin set).
func (b *nlBatch) addSetElement(set string, key []string) {
	b.setElement(set, key, b.conn.SetAddElements)
}

func (b *nlBatch) deleteSetElement(set string, key []string) {
	b.setElement(set, key, b.conn.SetDeleteElements)
}

func (b *nlBatch) setElement(set string, key []string, op func(*nftables.Set, []nftables.SetElement) error) {
	k, err := addrsKey(key)
	if err != nil {
		b.fail(err)
		return
	}
	b.ops++
	b.fail(op(&nftables.Set{Table: b.table, Name: set}, []nftables.SetElement{{Key: k}}))
}

func addrsKey(fields []string) ([]byte, error) {
	var key []byte
	for _, f := range fields {
		ip, err := ip4(f)
		if err != nil {
			return nil, err
		}
		key = append(key, ip...)
	}
	return key, nil
}

func (b *nlBatch) writeChain(name string, rules []string) {
	c := b.chain(name)
	b.conn.AddChain(c)
	b.conn.FlushChain(c)
	b.ops += 2
	for _, rule := range rules {
		exprs, err := b.ruleExprs(rule)
		if err != nil {
			b.fail(fmt.Errorf("netlink: chain %s: %w", name, err))
			return
		}
		b.conn.AddRule(&nftables.Rule{Table: b.table, Chain: c, Exprs: exprs})
		b.ops++
	}
}

func (b *nlBatch) flushChain(name string)  { b.ops++; b.conn.FlushChain(b.chain(name)) }
func (b *nlBatch) deleteChain(name string) { b.ops++; b.conn.DelChain(b.chain(name)) }
func (b *nlBatch) deleteSet(name string) {
	b.ops++
	b.conn.DelSet(&nftables.Set{Table: b.table, Name: name})
}

// The rule shapes buildPort writes (rules.go), as nft reads them.
var (
	reMasqFromOutside = regexp.MustCompile(`^ip daddr (\S+) (tcp|udp|sctp) dport (\d+) ip saddr != (\S+) jump (\S+)$`)
	reUpdateSet       = regexp.MustCompile(`^update @(\S+) \{ ip saddr \}$`)
	reSaddrInSet      = regexp.MustCompile(`^ip saddr @(\S+) goto (\S+)$`)
	reDNAT            = regexp.MustCompile(`^meta l4proto (tcp|udp|sctp) dnat to ([0-9.]+):(\d+)$`)
	reNumgen          = regexp.MustCompile(`^numgen random mod (\d+) vmap \{ (.*) \}$`)
	reNumgenItem      = regexp.MustCompile(`^(\d+) : goto (\S+)$`)
	reDNATMap         = regexp.MustCompile(`^meta l4proto (tcp|udp|sctp) dnat ip to numgen random mod (\d+) map \{ (.*) \}$`)
	reDNATMapItem     = regexp.MustCompile(`^(\d+) : ([0-9.]+) \. (\d+)$`)
	reVerdict         = regexp.MustCompile(`^(jump|goto) (\S+)$`)
	reSaddrCIDR       = regexp.MustCompile(`^ip saddr ([0-9.]+/\d+) (jump|goto) (\S+)$`)
	reFibLocal        = regexp.MustCompile(`^fib saddr type local (jump|goto) (\S+)$`)
	reSaddrNotInDrop  = regexp.MustCompile(`^ip saddr != \{ (.*) \} drop$`)
)

// ruleExprs translates one rule into the expressions nft generates for it;
// a numgen vmap's anonymous map is added to the batch on the way.
func (b *nlBatch) ruleExprs(rule string) ([]expr.Any, error) {
	if m := reMasqFromOutside.FindStringSubmatch(rule); m != nil {
		daddr, err := ip4(m[1])
		if err != nil {
			return nil, err
		}
		port, err := port16(m[3])
		if err != nil {
			return nil, err
		}
		_, cidr, err := net.ParseCIDR(m[4])
		if err != nil || cidr.IP.To4() == nil {
			return nil, fmt.Errorf("rule %q: bad CIDR", rule)
		}
		out := []expr.Any{loadAddr(16), cmp(expr.CmpOpEq, daddr)}
		out = append(out, l4proto(m[2])...)
		out = append(out,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}, cmp(expr.CmpOpEq, port),
			loadAddr(12),
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte(cidr.Mask), Xor: make([]byte, 4)},
			cmp(expr.CmpOpNeq, []byte(cidr.IP.To4())),
			&expr.Verdict{Kind: expr.VerdictJump, Chain: m[5]})
		return out, nil
	}
	if m := reSaddrCIDR.FindStringSubmatch(rule); m != nil {
		_, cidr, err := net.ParseCIDR(m[1])
		if err != nil || cidr.IP.To4() == nil {
			return nil, fmt.Errorf("rule %q: bad CIDR", rule)
		}
		return []expr.Any{loadAddr(12),
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte(cidr.Mask), Xor: make([]byte, 4)},
			cmp(expr.CmpOpEq, []byte(cidr.IP.To4())),
			jumpOrGoto(m[2], m[3])}, nil
	}
	if m := reFibLocal.FindStringSubmatch(rule); m != nil {
		// "fib saddr type local": the source address's route type, a
		// 32-bit integer in host order, is RTN_LOCAL.
		return []expr.Any{&expr.Fib{Register: 1, FlagSADDR: true, ResultADDRTYPE: true},
			cmp(expr.CmpOpEq, binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)),
			jumpOrGoto(m[1], m[2])}, nil
	}
	if m := reSaddrNotInDrop.FindStringSubmatch(rule); m != nil {
		return b.saddrNotIn(rule, strings.Split(m[1], ", "))
	}
	if m := reUpdateSet.FindStringSubmatch(rule); m != nil {
		return []expr.Any{loadAddr(12), &expr.Dynset{SrcRegKey: 1, SetName: m[1], Operation: uint32(unix.NFT_DYNSET_OP_UPDATE)}}, nil
	}
	if m := reSaddrInSet.FindStringSubmatch(rule); m != nil {
		return []expr.Any{loadAddr(12), &expr.Lookup{SourceRegister: 1, SetName: m[1]}, &expr.Verdict{Kind: expr.VerdictGoto, Chain: m[2]}}, nil
	}
	if m := reDNAT.FindStringSubmatch(rule); m != nil {
		addr, err := ip4(m[2])
		if err != nil {
			return nil, err
		}
		port, err := port16(m[3])
		if err != nil {
			return nil, err
		}
		out := l4proto(m[1])
		return append(out,
			&expr.Immediate{Register: 1, Data: addr},
			&expr.Immediate{Register: 2, Data: port},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true}), nil
	}
	if m := reNumgen.FindStringSubmatch(rule); m != nil {
		return b.numgen(rule, m[1], m[2])
	}
	if m := reDNATMap.FindStringSubmatch(rule); m != nil {
		return b.dnatMap(rule, m[1], m[2], m[3])
	}
	if m := reVerdict.FindStringSubmatch(rule); m != nil {
		return []expr.Any{jumpOrGoto(m[1], m[2])}, nil
	}
	return nil, fmt.Errorf("rule %q: no netlink translation", rule)
}

// numgen is "numgen random mod N vmap { 0 : goto A , ... }": a random
// number into a register, looked up in an anonymous constant verdict map,
// as nft builds it.
func (b *nlBatch) numgen(rule, mod, items string) ([]expr.Any, error) {
	return b.numgenLookup(rule, mod, strings.Split(items, " , "), reNumgenItem, nftables.TypeVerdict, 0,
		func(m []string) (nftables.SetElement, error) {
			return nftables.SetElement{VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: m[2]}}, nil
		})
}

// dnatMap is "meta l4proto P dnat ip to numgen random mod N map { 0 : A .
// PORT, ... }", as nft builds it: the map's data, ipv4_addr . inet_service
// (each padded to 4 bytes), fills the 32-bit registers 8 and 9 (register
// 1's first two words); the NAT reads the address from register 1 and the
// port from register 9.
func (b *nlBatch) dnatMap(rule, proto, mod, items string) ([]expr.Any, error) {
	out, err := b.numgenLookup(rule, mod, strings.Split(items, ", "), reDNATMapItem, addrPort, 1,
		func(m []string) (nftables.SetElement, error) {
			addr, err := ip4(m[2])
			if err != nil {
				return nftables.SetElement{}, err
			}
			port, err := port16(m[3])
			if err != nil {
				return nftables.SetElement{}, err
			}
			return nftables.SetElement{Val: append(append(addr, port...), 0, 0)}, nil
		})
	if err != nil {
		return nil, err
	}
	out = append(l4proto(proto), out...)
	return append(out, &expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 9, Specified: true}), nil
}

// addrPort is the data type ipv4_addr . inet_service.
var addrPort = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService)

// numgenLookup is "numgen random mod N" and the lookup of its value in an
// anonymous constant map (added to the batch) keyed by 32-bit integers in
// host order, as nft builds it, whose data goes to register dreg (0 for a
// verdict). Each item matches re, its key first; data makes the element's
// value of the rest.
func (b *nlBatch) numgenLookup(rule, mod string, items []string, re *regexp.Regexp, dataType nftables.SetDatatype, dreg uint32,
	data func(m []string) (nftables.SetElement, error)) ([]expr.Any, error) {
	n, err := strconv.Atoi(mod)
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("rule %q: bad modulus", rule)
	}
	var elems []nftables.SetElement
	for _, item := range items {
		m := re.FindStringSubmatch(item)
		if m == nil {
			return nil, fmt.Errorf("rule %q: map item %q", rule, item)
		}
		e, err := data(m)
		if err != nil {
			return nil, fmt.Errorf("rule %q: %w", rule, err)
		}
		k, _ := strconv.Atoi(m[1])
		e.Key = binaryutil.NativeEndian.PutUint32(uint32(k))
		elems = append(elems, e)
	}
	set := &nftables.Set{Table: b.table, Anonymous: true, Constant: true, IsMap: true,
		KeyType: nftables.TypeInteger, DataType: dataType, KeyByteOrder: binaryutil.NativeEndian}
	if err := b.conn.AddSet(set, elems); err != nil {
		return nil, fmt.Errorf("rule %q: %w", rule, err)
	}
	return []expr.Any{
		&expr.Numgen{Register: 1, Modulus: uint32(n), Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: 1, DestRegister: dreg, IsDestRegSet: true, SetID: set.ID, SetName: set.Name},
	}, nil
}

// saddrNotIn is "ip saddr != { A, B/N, ... } drop" (a firewall chain):
// an anonymous constant interval set, as nft builds it: each range is its
// first address and, flagged as an interval end, the address after it,
// preceded by an interval end at 0.0.0.0 unless a range starts there. The
// ranges are sorted and do not overlap (sourceRanges).
func (b *nlBatch) saddrNotIn(rule string, items []string) ([]expr.Any, error) {
	var elems []nftables.SetElement
	for i, item := range items {
		if !strings.Contains(item, "/") {
			item += "/32"
		}
		_, n, err := net.ParseCIDR(item)
		if err != nil || n.IP.To4() == nil {
			return nil, fmt.Errorf("rule %q: range %q", rule, item)
		}
		start := binary.BigEndian.Uint32(n.IP.To4())
		ones, _ := n.Mask.Size()
		end := uint64(start) + 1<<(32-ones)
		if i == 0 && start != 0 {
			elems = append(elems, nftables.SetElement{Key: make([]byte, 4), IntervalEnd: true})
		}
		elems = append(elems, nftables.SetElement{Key: binary.BigEndian.AppendUint32(nil, start)})
		if end <= 0xffffffff {
			elems = append(elems, nftables.SetElement{Key: binary.BigEndian.AppendUint32(nil, uint32(end)), IntervalEnd: true})
		}
	}
	set := &nftables.Set{Table: b.table, Anonymous: true, Constant: true, Interval: true, KeyType: nftables.TypeIPAddr}
	if err := b.conn.AddSet(set, elems); err != nil {
		return nil, fmt.Errorf("rule %q: %w", rule, err)
	}
	return []expr.Any{loadAddr(12),
		&expr.Lookup{SourceRegister: 1, SetID: set.ID, SetName: set.Name, Invert: true},
		&expr.Verdict{Kind: expr.VerdictDrop}}, nil
}

// loadAddr loads 4 bytes of the IPv4 header at offset (12 saddr, 16 daddr).
func loadAddr(offset uint32) *expr.Payload {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4}
}

func cmp(op expr.CmpOp, data []byte) *expr.Cmp { return &expr.Cmp{Op: op, Register: 1, Data: data} }

// l4proto is "meta l4proto P".
func l4proto(proto string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, cmp(expr.CmpOpEq, []byte{protoNumber(proto)})}
}

func protoNumber(proto string) byte {
	switch proto {
	case "udp":
		return unix.IPPROTO_UDP
	case "sctp":
		return unix.IPPROTO_SCTP
	}
	return unix.IPPROTO_TCP
}

func ip4(s string) ([]byte, error) {
	ip := net.ParseIP(s).To4()
	if ip == nil {
		return nil, fmt.Errorf("netlink: %q is not an IPv4 address", s)
	}
	return []byte(ip), nil
}

func port16(s string) ([]byte, error) {
	p, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("netlink: port %q: %w", s, err)
	}
	return binary.BigEndian.AppendUint16(nil, uint16(p)), nil
}

// elementKey is the key of a map element as the kernel stores it: each
// field of the concatenation padded to 4 bytes (ipv4_addr . inet_proto .
// inet_service, or inet_proto . inet_service).
func elementKey(e element) ([]byte, error) {
	var key []byte
	fields := e.Key
	if len(fields) == 3 {
		ip, err := ip4(fields[0])
		if err != nil {
			return nil, err
		}
		key = append(key, ip...)
		fields = fields[1:]
	}
	if len(fields) != 2 {
		return nil, fmt.Errorf("netlink: element key %v of map %s", e.Key, e.Map)
	}
	port, err := port16(fields[1])
	if err != nil {
		return nil, err
	}
	key = append(key, protoNumber(fields[0]), 0, 0, 0)
	return append(key, port[0], port[1], 0, 0), nil
}

// verdict is an element's value, "goto CHAIN", "jump CHAIN" or "drop".
func verdict(v string) (*expr.Verdict, error) {
	if v == "drop" {
		return &expr.Verdict{Kind: expr.VerdictDrop}, nil
	}
	m := reVerdict.FindStringSubmatch(v)
	if m == nil {
		return nil, fmt.Errorf("netlink: element value %q", v)
	}
	return jumpOrGoto(m[1], m[2]), nil
}

// jumpOrGoto is the verdict "jump CHAIN" (kind "jump") or "goto CHAIN".
func jumpOrGoto(kind, chain string) *expr.Verdict {
	if kind == "goto" {
		return &expr.Verdict{Kind: expr.VerdictGoto, Chain: chain}
	}
	return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain}
}
