// Command pause is the sandbox (infra) process of every cairn pod: it holds
// the pod's namespaces open, does nothing else, exits 0 on SIGTERM or SIGINT
// and, as PID 1 of a shared pod PID namespace, reaps the zombies re-parented
// to it. It is built statically (CGO_ENABLED=0) into the image
// cairn.local/pause by package github.com/cairn-dev/cairn/ops/images.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("cairn pause")
		return
	}
	// Subreaper as well, so that orphans are reaped here even when pause is
	// not PID 1 of its namespace.
	_ = prctl(prSetChildSubreaper, 1)

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap collects every exited child without blocking; one SIGCHLD may stand
// for several children.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}

const prSetChildSubreaper = 36

func prctl(option, arg uintptr) error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, option, arg, 0); errno != 0 {
		return errno
	}
	return nil
}
