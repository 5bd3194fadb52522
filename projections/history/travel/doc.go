// Package travel shows objects as they were: the state of one object, or of
// every object of a kind, at a revision or a time (the last change of each
// key at or before it, unless that change was a delete), and the diff of one
// object between two points of the log.
package travel
