package main

import (
	"errors"
	"flag"
	"io"
	"strings"
)

// errUsage marks a flag error the flag package has already reported.
var errUsage = errors.New("cairn: usage")

func isUsage(err error) bool { return errors.Is(err, errUsage) }

// newFlagSet returns a flag set for a subcommand that reports to stderr and
// returns errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("cairn "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses args into fs. -h is not an error; other flag errors and
// stray arguments are errUsage.
func parse(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, errUsage
	}
	if fs.NArg() > 0 {
		fs.Output().Write([]byte("unexpected arguments: " + strings.Join(fs.Args(), " ") + "\n"))
		fs.Usage()
		return false, errUsage
	}
	return false, nil
}

// listFlag is a comma-separated list flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}
