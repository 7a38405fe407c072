package cli

import "github.com/spf13/cobra"

// SetVersion gives root and every command below it a --version flag that prints
// "NAME version VERSION", so `hotcert server --version` works as `hotcert
// --version` does.
func SetVersion(root *cobra.Command) {
	v := Version()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Version = v
		c.SetVersionTemplate(root.Name() + " version {{.Version}}\n")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
