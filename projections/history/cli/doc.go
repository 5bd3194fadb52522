// Package cli holds the cairn subcommands of the history projections, one
// function each with the signature of services/cairn's commands:
//
//	cairn timeline <kind>/<name> [-n ns] [--uid U] [-o json] [--follow]
//	cairn audit [--user U] [--verb V] [--kind K] [-n N] [--since D|T] [--until T] [-o json]
//	cairn get <kind> [name] --at <revision|RFC3339> [-n ns] [-o json]
//	cairn diff <kind>/<name> --from T1 [--to T2] [-n ns] [-o json]
//	cairn replay --to <revision|RFC3339> --data-dir D [--nats-url U | --from-data-dir S]
//
// The query commands call the history API the apiserver serves under
// Prefix (web.Handler), with the rest config the binary resolves from the
// flags it shares with its other commands (Env: --kubeconfig, KUBECONFIG,
// --data-dir, as services/cairn documents); with --db they open a store
// file directly instead (and with --nats-url bring it up to date from the
// log first). Replay reads the log from NATS. Each command adds its own
// flags to Env.Flags and parses it; a flag error prints the usage and
// returns ErrUsage.
package cli
