// Package layers holds no code: its test checks the import boundaries
// between cairn's layers (see TestBoundaries), so that a consumer of the log
// never links the etcd side and no lower layer imports a higher one.
package layers
