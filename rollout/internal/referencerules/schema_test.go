package referencerules

import (
	"slices"
	"strings"
	"testing"
)

// fieldInSchema follows the API server's pruning: declared properties,
// x-kubernetes-preserve-unknown-fields and additionalProperties keep a field,
// anything else is pruned; a field that is not a string is refused.
func TestFieldInSchema(t *testing.T) {
	s := map[string]any{"type": "object", "properties": map[string]any{
		"spec": map[string]any{"type": "object", "properties": map[string]any{
			"restartAt": map[string]any{"type": "string", "format": "date-time"},
			"replicas":  map[string]any{"type": "integer"},
			"port":      map[string]any{"type": "integer", "x-kubernetes-int-or-string": true},
			"template": map[string]any{"type": "object", "properties": map[string]any{
				"metadata": map[string]any{"type": "object", "properties": map[string]any{
					"annotations": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
				}},
			}},
			"bare":  map[string]any{"type": "object", "properties": map[string]any{"metadata": map[string]any{"type": "object"}}},
			"extra": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
		}},
	}}
	for _, c := range []struct {
		path string
		want string // "" kept, else a part of the reason
	}{
		{"spec.restartAt", ""},
		{"spec.restartedAt", "no field spec.restartedAt"},
		{"spec.template.metadata.annotations.hotcert.dev/config-hash", ""},
		{"spec.bare.metadata.annotations.hotcert.dev/config-hash", "no field spec.bare.metadata.annotations"},
		{"spec.extra.anything.below", ""},
		{"spec.replicas", "of type integer"},
		{"spec.port", ""},
		{"metadata.annotations.x", ""},
		{"status.restartAt", "no field status"},
	} {
		path := strings.Split(c.path, ".")
		if strings.Contains(c.path, "hotcert.dev/") {
			i := slices.Index(path, "hotcert")
			path = append(path[:i:i], "hotcert.dev/config-hash")
		}
		got := fieldInSchema(s, path)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.path, got, c.want)
		}
	}
}
