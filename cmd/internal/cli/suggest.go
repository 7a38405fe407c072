package cli

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// SuggestFlags makes an unknown flag on cmd or any of its subcommands an error that
// names the closest known flag: "unknown flag: --cert-fiel (did you mean
// --cert-file?)".
func SuggestFlags(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		m := unknownFlag.FindStringSubmatch(err.Error())
		if m == nil {
			return err
		}
		if s := closestFlag(c, m[1]); s != "" {
			return fmt.Errorf("%w (did you mean --%s?)", err, s)
		}
		return fmt.Errorf("%w (see %s --help)", err, c.CommandPath())
	})
}

var unknownFlag = regexp.MustCompile(`^unknown flag: --([^ =]+)`)

// closestFlag returns the visible flag of c nearest to name (edit distance at most
// 2, or one name a prefix of the other), or "".
func closestFlag(c *cobra.Command, name string) string {
	best, bestD := "", 3
	visit := func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" {
			return
		}
		d := distance(name, f.Name)
		if d > 2 && (strings.HasPrefix(f.Name, name) || strings.HasPrefix(name, f.Name)) {
			d = 2
		}
		if d < bestD {
			best, bestD = f.Name, d
		}
	}
	c.Flags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Message renders err as the one line a binary prints before exiting: cobra's
// multi-line "unknown command" suggestion becomes "(did you mean demo?)".
func Message(err error) string {
	msg := err.Error()
	head, tail, ok := strings.Cut(msg, "\n\nDid you mean this?\n")
	if !ok {
		return strings.TrimSpace(msg)
	}
	return fmt.Sprintf("%s (did you mean %s?)", head, strings.Join(strings.Fields(tail), " or "))
}

// GroupsNeedACommand makes every command below root that only groups subcommands
// (`hotcert pki`, `hotcert token`) fail with a one-line reason when run without one
// or with an unknown one, naming the closest, instead of printing its help and
// exiting 0.
func GroupsNeedACommand(root *cobra.Command) {
	for _, c := range root.Commands() {
		GroupsNeedACommand(c)
		if !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
			continue
		}
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			var names []string
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() {
					names = append(names, sub.Name())
				}
			}
			if len(args) == 0 {
				return fmt.Errorf("%s needs a command: %s (see %s --help)", cmd.CommandPath(), strings.Join(names, ", "), cmd.CommandPath())
			}
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2 // cobra's default for the root's suggestions
			}
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				return fmt.Errorf("unknown command %q for %q (did you mean %s?)", args[0], cmd.CommandPath(), strings.Join(s, " or "))
			}
			return fmt.Errorf("unknown command %q for %q: want %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))
		}
	}
}
