package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Alias registers old as a deprecated name of the flag name, already defined on fs:
// both set the same value, old is hidden from --help, and using it prints
// "Flag --old has been deprecated, use --name instead" on stderr. It panics when
// name is not defined (a wiring mistake, caught by any test that builds the command).
func Alias(fs *pflag.FlagSet, name, old string) {
	f := fs.Lookup(name)
	if f == nil {
		panic(fmt.Sprintf("cli.Alias: no flag --%s", name))
	}
	fs.AddFlag(&pflag.Flag{Name: old, Usage: f.Usage, Value: f.Value, DefValue: f.DefValue, NoOptDefVal: f.NoOptDefVal})
	if err := fs.MarkDeprecated(old, "use --"+name+" instead"); err != nil {
		panic(err)
	}
}

// WarningsTo sends the flag warnings of root and every command below it (such as
// "Flag --tls-cert has been deprecated") to w, the standard error: standard output
// keeps only results, so `-o json` stays parseable with a deprecated flag.
func WarningsTo(root *cobra.Command, w io.Writer) {
	root.Flags().SetOutput(w)
	root.PersistentFlags().SetOutput(w)
	for _, c := range root.Commands() {
		WarningsTo(c, w)
	}
}
