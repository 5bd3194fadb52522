package main

import (
	"context"
	"errors"
	"io"

	historycli "github.com/cairn-dev/cairn/projections/history/cli"
)

// history adapts a command of package projections/history/cli (timeline,
// audit, get, diff, replay) to a cairn subcommand.
func history(f func(context.Context, []string, io.Writer, io.Writer) error) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		err := f(ctx, args, stdout, stderr)
		if errors.Is(err, historycli.ErrUsage) {
			return errUsage
		}
		return err
	}
}
