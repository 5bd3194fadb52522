// Package storage keeps API objects in etcd, one key per object, and commits
// every change in one transaction together with its events.WriteMeta under
// events.MetaKey. Because both puts share the transaction's revision, the
// log publisher (package events) can rebuild the complete event of any
// committed change from etcd alone, whenever it runs; nothing is ever
// published by the writer itself (no dual write).
//
// Keys: /registry/<group|core>/<resource>/<namespace>/<name> for namespaced
// objects, /registry/<group|core>/<resource>/<name> for cluster-scoped ones.
// Values are the object's JSON without metadata.resourceVersion: the
// resourceVersion of an object is the ModRevision of its key.
//
// Writes are compare-and-swap on the key's ModRevision; a failed compare
// returns ErrConflict (or ErrExists / ErrNotFound) together with the current
// value, so callers can retry without another read. Store is safe for
// concurrent use.
package storage
