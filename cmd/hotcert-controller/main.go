// Command hotcert-controller is hotcert's rollout controller: it rolls the
// Deployments, StatefulSets and DaemonSets that cannot hot-reload when a Secret or
// ConfigMap key they consume changes. It is a binary of its own so that the
// hotcert CLI (demo, server, agent, inspect, check) links no Kubernetes client.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hotcert/hotcert/cmd/hotcert-controller/app"
	"github.com/hotcert/hotcert/cmd/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.NewCommand(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "hotcert-controller:", cli.Message(err))
		os.Exit(1)
	}
}
