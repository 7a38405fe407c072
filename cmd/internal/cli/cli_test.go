package cli

import (
	"bytes"
	"errors"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func newTestCommand(out *bytes.Buffer) (*cobra.Command, *string) {
	var cert string
	root := &cobra.Command{Use: "tool", SilenceErrors: true, SilenceUsage: true}
	sub := &cobra.Command{Use: "serve", RunE: func(*cobra.Command, []string) error { return nil }}
	sub.Flags().StringVar(&cert, "cert-file", "", "certificate")
	sub.Flags().String("key-file", "", "key")
	Alias(sub.Flags(), "cert-file", "tls-cert")
	root.AddCommand(sub)
	root.SetOut(out)
	root.SetErr(out)
	SetVersion(root)
	SuggestFlags(root)
	return root, &cert
}

func TestAliasSetsTheSameValueAndIsDeprecated(t *testing.T) {
	var out bytes.Buffer
	root, cert := newTestCommand(&out)
	root.SetArgs([]string{"serve", "--tls-cert", "a.crt"})
	if err := root.Execute(); err != nil || *cert != "a.crt" {
		t.Fatalf("--tls-cert: err %v, value %q", err, *cert)
	}
	sub, _, _ := root.Find([]string{"serve"})
	f := sub.Flags().Lookup("tls-cert")
	if f.Deprecated != "use --cert-file instead" || !f.Hidden {
		t.Fatalf("alias flag: deprecated %q hidden %v", f.Deprecated, f.Hidden)
	}
}

func TestSuggestFlags(t *testing.T) {
	for _, tc := range []struct{ typo, want string }{
		{"--cert-fil", "did you mean --cert-file?"},
		{"--kee-file", "did you mean --key-file?"},
		{"--cert", "did you mean --cert-file?"},
		{"--tls-certt", "see tool serve --help"}, // deprecated names are never suggested
		{"--zzzzzz", "see tool serve --help"},
	} {
		var out bytes.Buffer
		root, _ := newTestCommand(&out)
		root.SetArgs([]string{"serve", tc.typo, "x"})
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.typo, err, tc.want)
		}
	}
}

func TestSetVersionOnSubcommands(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"serve", "--version"}} {
		var out bytes.Buffer
		root, _ := newTestCommand(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil || out.String() != "tool version "+Version()+"\n" {
			t.Errorf("%v: %q, %v", args, out.String(), err)
		}
	}
}

func TestVersionOf(t *testing.T) {
	stamped := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		linked string
		bi     *debug.BuildInfo
		want   string
	}{
		{"v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}}, "v1.2.3"},                               // make release
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},                                     // go install …@v1.2.3
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: stamped}, "dev+0123456789ab.dirty"}, // go build in a checkout
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: stamped[:1]}, "dev+0123456789ab"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"}, // -buildvcs=false
		{"", nil, "dev"},
	} {
		if got := versionOf(tc.linked, tc.bi); got != tc.want {
			t.Errorf("versionOf(%q, %+v) = %q, want %q", tc.linked, tc.bi, got, tc.want)
		}
	}
}

func TestMessageIsOneLine(t *testing.T) {
	err := errors.New("unknown command \"demp\" for \"hotcert\"\n\nDid you mean this?\n\tdemo\n")
	if got := Message(err); got != `unknown command "demp" for "hotcert" (did you mean demo?)` {
		t.Fatalf("Message = %q", got)
	}
	if got := Message(errors.New("plain")); got != "plain" {
		t.Fatalf("Message = %q", got)
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "abc", 0}, {"cert-fiel", "cert-file", 2}, {"ca-fil", "ca-file", 1}, {"", "ab", 2}} {
		if got := distance(tc.a, tc.b); got != tc.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
