// Package replay rebuilds a cairn data directory from the log alone
// (disaster recovery, or a copy of the cluster as it was at a revision).
//
// # Revisions
//
// resourceVersion is the etcd revision, so the rebuilt etcd must reproduce
// the revisions of the original. Replay applies each logged revision as one
// etcd transaction: the objects of that revision (put, or delete for
// DELETED) and the events.WriteMeta under events.MetaKey, exactly as the
// apiserver's storage wrote them. Revisions the log has no event for
// (leader elections, leases that were later replaced on CAIRN_LEASES,
// anything outside /registry/) are padded with puts of PadKey, so the next
// transaction lands on the next logged revision. Values are the objects
// without metadata.resourceVersion, byte for byte when the publisher's
// splice can be undone.
//
// CAIRN_LEASES keeps only the last change of each Lease. A Lease renewed
// since its creation therefore comes back as a MODIFIED event of a key
// that does not exist yet; replay writes it, as of that event, in the pad
// just before, so that its change is a modification as on the original.
//
// # Speed, and why every revision still lands where it belongs
//
// The destination etcd member has no listeners: replay writes through an
// in-process client (v3client), with no gRPC and no socket. The log is
// fetched in large batches and decoded on GOMAXPROCS goroutines, in order.
// Transactions are pipelined, up to 64 in flight, so that etcd commits
// many per raft round. Pipelined requests can reach etcd out of order, so
// each transaction is conditioned on the mod revisions of MetaKey and
// PadKey after its predecessor (every transaction writes one of them): one
// applied early fails its compare and changes nothing, and replay commits
// it again once its predecessor has landed (Report.Reordered counts them).
// A successful transaction is also checked to have committed at its
// revision; any other outcome is ErrDiverged.
//
// # The log of the rebuilt directory
//
// `cairn up` starts its publisher at the last message of CAIRN and
// CAIRN_LEASES in <data-dir>/nats. Replay therefore also copies the
// replayed events (same subjects, data, Nats-Msg-Id and revision headers)
// into a fresh JetStream store there, in order, as their revisions land.
// The publisher then finds the log ending at the replayed head and resumes
// after it; `cairn events verify` compares the same events with the same
// etcd history and passes. (Without the copy, the publisher would start
// from revision 1 and republish the whole history from etcd: the objects
// would match, but the events of foreign writes would get new ids and
// times.)
//
// Unless Config.Fsync is set, neither etcd nor the copy syncs as it goes;
// Run syncs every file of the data directory once, after closing both.
package replay
