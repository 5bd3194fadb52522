package cairntest

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is one started process and the goroutine that reaps it; Proc and
// Up run theirs through it.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // what cmd.Wait returned, once done is closed
}

// startChild starts cmd and reaps it in the background.
func startChild(cmd *exec.Cmd) (*child, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process; one that has already ended is no error.
func (c *child) signal(sig syscall.Signal) error {
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// wait waits up to timeout for the process to end and reports whether it
// did.
func (c *child) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// kill sends SIGKILL and waits until the process is reaped.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(os.Kill)
	<-c.done
}

// stop sends SIGINT, waits up to timeout, then kills: the cleanup of a
// child the test did not stop itself, so that it can clean up (a node
// removes its containers and network namespace).
func (c *child) stop(timeout time.Duration) {
	if c.exited() {
		return
	}
	_ = c.signal(syscall.SIGINT)
	if !c.wait(timeout) {
		c.kill()
	}
}

// killedBy reports whether the process ended by signal sig.
func (c *child) killedBy(sig syscall.Signal) bool {
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
