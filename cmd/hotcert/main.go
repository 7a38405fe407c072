// Command hotcert is the one binary of the project: the reference control plane
// (server) and agent, the demo, inspect, check and the rollout controller. Each
// subcommand only wires library packages together.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "hotcert:", err)
		os.Exit(1)
	}
}
