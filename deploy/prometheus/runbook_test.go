package prometheus

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// runbookPrefix is where every alert's runbook_url points: a section of
// docs/observability.md.
const runbookPrefix = "https://github.com/hotcert/hotcert/blob/main/docs/observability.md#"

// TestRunbookURLsHaveSections checks that each alert's runbook_url names a
// heading of docs/observability.md (GitHub's anchor of it), so the link of an
// alert opens its runbook.
func TestRunbookURLsHaveSections(t *testing.T) {
	raw, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	heading := regexp.MustCompile(`(?m)^#{1,6} +(.+)$`)
	for _, m := range heading.FindAllStringSubmatch(string(raw), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	for _, f := range ruleFiles {
		rules := readYAML[struct {
			Groups []struct {
				Rules []struct {
					Alert       string            `json:"alert"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		}](t, f.rules)
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				u := r.Annotations["runbook_url"]
				anchor, ok := strings.CutPrefix(u, runbookPrefix)
				if !ok || anchor != strings.ToLower(r.Alert) || !anchors[anchor] {
					t.Errorf("%s: alert %s: runbook_url %q, want %s%s and a heading %q in docs/observability.md", f.rules, r.Alert, u, runbookPrefix, strings.ToLower(r.Alert), r.Alert)
				}
			}
		}
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading: lower case,
// punctuation other than '-' and '_' dropped, spaces as '-'.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
