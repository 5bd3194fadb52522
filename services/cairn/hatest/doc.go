// Package hatest runs servers joined into one cluster (cairn up
// --cluster-init, --join) as child processes on loopback addresses.
package hatest
