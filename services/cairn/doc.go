// Command cairn is the one binary of cairn: every service runs from it.
//
//	cairn up        run a whole cluster in this process (embedded etcd and NATS)
//	cairn version   print the version
//
// Run `cairn <command> -h` for a command's flags. The binary owns signal
// handling: SIGINT or SIGTERM cancels the context the command runs with,
// and a second signal kills the process.
package main
