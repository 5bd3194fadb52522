package proxy

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"github.com/cairn-dev/cairn/services/netns"
)

// DefaultShardServices is the number of Services a shard table holds on
// average (Config.ShardServices): the kernel validates a whole table on a
// commit that adds a jump, a goto or a verdict-map element, so a change
// costs what its shard holds, not what the node does (doc.go, Shards).
const DefaultShardServices = 500

// shardTable is the name of shard i's table: TableName for the first (so
// that a node with few Services has the one table it always had),
// TableName-i for the others.
func shardTable(i int) string {
	if i == 0 {
		return TableName
	}
	return TableName + "-" + strconv.Itoa(i)
}

// parseShardTable is shardTable's inverse; ok is false for a table that
// is not the proxy's.
func parseShardTable(name string) (i int, ok bool) {
	if name == TableName {
		return 0, true
	}
	rest, found := strings.CutPrefix(name, TableName+"-")
	if !found {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 1 || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}

// shardFor is the shard of a Service among n: Lamping and Veach's jump
// consistent hash of its namespace/name, so the shard of a Service does
// not depend on the other Services, a restarted proxy finds each where
// its predecessor put it, and going from n to n+1 shards moves only the
// Services of the new shard (about 1/(n+1) of them), from n+1 to n only
// those of the last.
func shardFor(key types.NamespacedName, n int) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key.Namespace + "/" + key.Name))
	k := h.Sum64()
	b, j := int64(-1), int64(0)
	for j < int64(n) {
		b = j
		k = k*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((k>>33)+1)))
	}
	return int(b)
}

// shardCount is the number of shards for n Services with size Services a
// shard, given cur shards now (0: none yet, as in a full Sync). It grows
// as soon as the shards would hold more than size on average, and shrinks
// only once they would hold less than 3/4 of size with one shard less, so
// that a count going to and fro around a boundary does not move Services
// to and fro.
func shardCount(n, size, cur int) int {
	need := max(1, (n+size-1)/size)
	if cur == 0 || need > cur || n <= (cur-1)*size*3/4 {
		return need
	}
	return cur
}

// NFT is the proxy's access to the nftables of the ip family of one
// network namespace: a knftables.Interface without a default table (every
// object names its table, so one transaction writes several shards) and a
// listing of the proxy's tables.
type NFT interface {
	knftables.Interface
	// Tables returns the proxy's tables (TableName and its shards) with
	// the chains and named sets (not maps) in each.
	Tables(ctx context.Context) (map[string]*tableObjects, error)
}

// tableObjects are the chains and named sets of one table.
type tableObjects struct {
	chains, sets []string
}

// kernelNFT is the NFT of a real namespace: knftables for transactions
// (nft -f, run there), netlink for the listing, which nft would make cost
// as much as the ruleset (doc.go, Cost).
type kernelNFT struct {
	knftables.Interface
	netns string // "" the process's own
}

// NewNFT returns the NFT of the network namespace at nsPath; empty nsPath
// means the caller's own.
func NewNFT(nsPath string) (NFT, error) {
	if nsPath == "" {
		nft, err := knftables.New("", "")
		if err != nil {
			return nil, fmt.Errorf("proxy: nftables: %w", err)
		}
		return &kernelNFT{Interface: nft}, nil
	}
	n := &nsNFT{ns: nsPath}
	err := netns.Do(nsPath, func() error {
		var err error
		n.inner, err = knftables.New("", "")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: nftables in %s: %w", nsPath, err)
	}
	return &kernelNFT{Interface: n, netns: nsPath}, nil
}

func (k *kernelNFT) Tables(ctx context.Context) (map[string]*tableObjects, error) {
	conn, closeConn, err := nlConn(k.netns)
	if err != nil {
		return nil, err
	}
	defer closeConn()
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("netlink: list tables: %w", err)
	}
	out := map[string]*tableObjects{}
	for _, t := range tables {
		if _, ok := parseShardTable(t.Name); !ok {
			continue
		}
		objs := &tableObjects{}
		out[t.Name] = objs
		sets, err := conn.GetSets(t)
		if err != nil {
			return nil, fmt.Errorf("netlink: list sets of %s: %w", t.Name, err)
		}
		for _, s := range sets {
			if !s.Anonymous && !s.IsMap {
				objs.sets = append(objs.sets, s.Name)
			}
		}
	}
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("netlink: list chains: %w", err)
	}
	for _, c := range chains {
		if objs := out[c.Table.Name]; objs != nil {
			objs.chains = append(objs.chains, c.Name)
		}
	}
	return out, nil
}

// nlConn opens a netlink connection to nftables in the namespace at path
// ("" the process's own).
func nlConn(path string) (*nftables.Conn, func(), error) {
	var opts []nftables.ConnOption
	closeFd := func() {}
	if path != "" {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("netlink: open %s: %w", path, err)
		}
		closeFd = func() { unix.Close(fd) }
		opts = append(opts, nftables.WithNetNSFd(fd))
	}
	conn, err := nftables.New(opts...)
	if err != nil {
		closeFd()
		return nil, nil, fmt.Errorf("netlink: %w", err)
	}
	return conn, closeFd, nil
}
