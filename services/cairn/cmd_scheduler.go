package main

import (
	"context"
	"fmt"
	"io"

	"github.com/cairn-dev/cairn/services/cairn/up"
	"github.com/cairn-dev/cairn/services/scheduler"
)

// runScheduler runs one scheduler replica as its own process. Replicas
// bind optimistically and the apiserver refuses a binding that would
// overcommit a node; --sharded splits the pods between replicas instead.
func runScheduler(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		identity, name string
		sharded        bool
		workers        int
		eventQPS       float64
		eventBurst     int
	)
	fs := newFlagSet("scheduler", stderr)
	fs.serviceFlags(up.SchedulerKubeconfig, "")
	fs.StringVar(&identity, "identity", "", "this replica's name (default hostname-pid)")
	fs.StringVar(&name, "scheduler-name", scheduler.DefaultSchedulerName, "schedule the pods whose spec.schedulerName is this")
	fs.BoolVar(&sharded, "sharded", false, "split the pods between the replicas that set it, instead of letting every replica bind any pod")
	fs.IntVar(&workers, "workers", 0, "bindings and status writes in flight (default 256)")
	fs.Float64Var(&eventQPS, "event-qps", 0, "Event writes per second (Scheduled, FailedScheduling); 0: 50, negative: no limit")
	fs.IntVar(&eventBurst, "event-burst", 0, "Event writes allowed in a burst (0: 100)")
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	log, err := fs.logger(stderr)
	if err != nil {
		return err
	}
	rc, js, closeNATS, err := fs.connectService("scheduler", log)
	if err != nil {
		return err
	}
	defer closeNATS()
	s, err := scheduler.New(scheduler.Config{RestConfig: rc, JS: js, Identity: identity, SchedulerName: name,
		Sharded: sharded, Workers: workers, EventQPS: float32(eventQPS), EventBurst: eventBurst, Log: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "scheduler running (%s)\n", name)
	return s.Run(ctx)
}
