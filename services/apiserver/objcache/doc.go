// Package objcache keeps an apiserver-side cache of one resource,
// as an informer keeps its store: a snapshot of etcd at one revision, then
// the log through the apiserver's watch hub, resnapshotting when the watch
// ends. The authenticators, admission plugins and authorizers that decide
// on every request read it instead of etcd.
package objcache
