// Command hotcert is the project's CLI: the reference control plane (server) and
// agent, the demo, inspect, check, pki and token. Each subcommand only wires
// library packages and the apps of cmd/hotcert/internal together. The rollout
// controller is the hotcert-controller binary.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hotcert/hotcert/cmd/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "hotcert:", cli.Message(err))
		os.Exit(1)
	}
}
