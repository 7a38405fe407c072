// Command trust-manager is cert-manager's trust-manager
// (github.com/cert-manager/trust-manager), at the version pinned in this
// module's go.mod, built from the Go module proxy by hack/build-trust-manager.sh
// for hotcert's tests of the CA-rotation recipe.
package main

import (
	"fmt"
	"os"

	"github.com/cert-manager/trust-manager/cmd/trust-manager/app"
)

func main() {
	if err := app.NewCommand().Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
