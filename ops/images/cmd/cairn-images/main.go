// Command cairn-images builds cairn's offline OCI image archives (see
// package github.com/cairn-dev/cairn/ops/images) into a directory and prints
// one line per image: reference, manifest digest, archive path.
//
//	go run ./ops/images/cmd/cairn-images -out .cairn/images [-sidecar-injector BINARY]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairn-dev/cairn/ops/images"
)

func main() {
	out := flag.String("out", ".cairn/images", "directory for the image archives")
	busybox := flag.String("busybox", "/bin/busybox", "static busybox binary")
	injector := flag.String("sidecar-injector", "", "also build "+images.SidecarInjectorRef+" from this static sidecar-injector binary")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	imgs, err := images.Options{Busybox: *busybox}.Build(ctx, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cairn-images:", err)
		os.Exit(1)
	}
	if *injector != "" {
		img, err := images.BuildSidecarInjector(*injector, *out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cairn-images:", err)
			os.Exit(1)
		}
		imgs = append(imgs, img)
	}
	for _, img := range imgs {
		fmt.Printf("%s %s %s\n", img.Ref, img.Digest, img.Archive)
	}
}
