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
// transaction lands on the next logged revision; a mismatch is an error.
// Values are the objects without metadata.resourceVersion, byte for byte
// when the publisher's splice can be undone.
//
// # The log of the rebuilt directory
//
// `cairn up` starts its publisher at the last message of CAIRN and
// CAIRN_LEASES in <data-dir>/nats. Replay therefore also copies the
// replayed events (same subjects, data, Nats-Msg-Id and revision headers)
// into a fresh JetStream store there. The publisher then finds the log
// ending at the replayed head and resumes after it; `cairn events verify`
// compares the same events with the same etcd history and passes. (Without
// the copy, the publisher would start from revision 1 and republish the
// whole history from etcd: the objects would match, but the events of
// foreign writes would get new ids and times.)
package replay
