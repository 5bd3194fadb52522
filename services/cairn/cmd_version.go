package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", stderr)
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	fmt.Fprintln(stdout, versionString())
	return nil
}

// versionString describes the build from the information the Go toolchain
// embeds: module version, VCS revision when built with VCS stamping, and
// the Go version and platform.
func versionString() string {
	version, revision, modified := "(devel)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	s := "cairn " + version
	if revision != "" {
		if len(revision) > 12 {
			revision = revision[:12]
		}
		s += " " + revision
		if modified {
			s += "-dirty"
		}
	}
	return fmt.Sprintf("%s %s %s/%s", s, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
