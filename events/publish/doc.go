// Package publish is the etcd side of cairn's log (package events): the
// publisher that moves every committed change from etcd to NATS JetStream
// exactly once and in commit order, the compactor that keeps etcd's
// history behind it, and Verify, which checks the log against etcd. Only
// the apiserver and tools link it; consumers of the log (controllers,
// scheduler, kubelets, projections) read the log through package events
// and never link an etcd client.
//
// # Exactly once
//
// A dual write (write etcd, then publish) loses events when the writer dies
// between the two. Instead:
//
//  1. The apiserver makes every change in one etcd transaction that writes
//     the object and puts its WriteMeta at MetaKey, so both carry the same
//     revision and the event can be rebuilt from etcd alone.
//  2. One publisher is elected (concurrency.Election on
//     /cairn/election/publisher, session TTL 5s). A dead leader blocks the
//     others until its session expires, except a restart of the same server:
//     a candidate first deletes the keys its own identity
//     (PublisherConfig.Identity, stable per server) left under dead
//     sessions, so a crashed server's successor leads at once. As leader
//     it reads the last message of both streams from their leaders (never a
//     replica, which may lag): its revision (and index
//     within the revision) is where the log ends. It watches etcd from that
//     revision, with previous values, and publishes each revision's events
//     in order.
//  3. Each publish carries Nats-Msg-Id (so a repeat within the duplicate
//     window is dropped) and the stream's expected last sequence, which the
//     stream leader checks before it stores anything. The publishes are
//     pipelined (256 in flight): if one fails, every later one to that
//     stream fails its check too, so a stream never has a hole, and a
//     message is only ever stored right after its predecessor, even with
//     two publishers at once (both publish etcd's one history in one order
//     under the same ids). No Nats-Expected-Last-Msg-Id: on a replicated
//     stream nats-server checks it on each replica as it applies, and a
//     replica that caught up from the leader fails that check and stops
//     (see publishOpts). Before
//     switching from one stream to the other the publisher waits for all
//     acknowledgements, so the two streams together always hold a prefix of
//     the changes in revision order.
//  4. A publish without an answer (no acknowledgement in time, "no
//     response from stream" while a stream elects a leader or gains
//     replicas, a reconnect) has an unknown outcome. The publisher then
//     publishes that message again, with the same Nats-Msg-Id and fence,
//     until JetStream answers for it (within the duplicate window): the
//     fence stores it only after its predecessor, the id makes a second
//     copy a duplicate, and where the fence fails it reads the message's place
//     from the stream leader to tell "stored by the lost attempt" from
//     "another publisher was there". Acknowledgements are checked in
//     publish order, so nothing after an unacknowledged message counts as
//     published (LastPublished, the compactor's bound).
//  5. On any other failure, or when the election session is lost, the publisher
//     stops, waits for its in-flight acknowledgements, reads the tail of
//     the streams again and resumes from there. A deposed leader that still
//     publishes cannot interleave with the new one: whichever publishes
//     second fails the checks and re-reads the tail.
//  6. The Compactor compacts etcd only to the last published revision it saw
//     one interval earlier (minus one, so the previous values of the next
//     revision stay readable): the publisher can always resume, and lists
//     and continue tokens keep one interval of history.
//
// Verify checks all of it against etcd, and the tests kill publisher
// processes with SIGKILL in a loop and then require Verify to pass.
package publish
