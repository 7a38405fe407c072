package referencerules

import (
	"fmt"
	"regexp"
	"strings"
)

// segment is one step of a field path: a field name, and whether its value is
// a list whose every element is taken.
type segment struct {
	field string
	each  bool
}

var pathRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(\[\])?(\.[A-Za-z_][A-Za-z0-9_-]*(\[\])?)*$`)

// parsePath parses "spec.tools[].secretRef" (the syntax the CRD validates).
func parsePath(p string) ([]segment, error) {
	if p == "" {
		return nil, nil
	}
	if !pathRE.MatchString(p) {
		return nil, fmt.Errorf("referencerules: path %q: want dot-separated field names, each optionally followed by []", p)
	}
	var out []segment
	for _, f := range strings.Split(p, ".") {
		s := segment{field: strings.TrimSuffix(f, "[]")}
		s.each = s.field != f
		out = append(out, s)
	}
	return out, nil
}

// field reads a string-valued field: the values found at path in obj, each
// non-empty one, or def when none is.
type field struct {
	path []segment
	def  string
}

// strings returns the values of f in obj.
func (f field) values(obj any) []string {
	var out []string
	walk(obj, f.path, func(v any) {
		if s, ok := v.(string); ok && s != "" {
			out = append(out, s)
		}
	})
	if len(out) == 0 && f.def != "" {
		out = []string{f.def}
	}
	return out
}

// walk calls fn with each value reached from v along path.
func walk(v any, path []segment, fn func(any)) {
	if len(path) == 0 {
		fn(v)
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	next, ok := m[path[0].field]
	if !ok || next == nil {
		return
	}
	if !path[0].each {
		walk(next, path[1:], fn)
		return
	}
	list, ok := next.([]any)
	if !ok {
		return
	}
	for _, e := range list {
		walk(e, path[1:], fn)
	}
}

// pair is a name with the key read beside it ("" when every key is consumed).
type pair struct{ name, key string }

// pairs reads (name, key) pairs: while the two paths share their leading
// segments, both are read from the same place, so that a name and a key in the
// same list element go together; the rest of each path is read from there.
func pairs(obj any, name field, key *field) []pair {
	var out []pair
	var rec func(v any, np, kp []segment)
	rec = func(v any, np, kp []segment) {
		if key != nil && len(np) > 1 && len(kp) > 1 && np[0] == kp[0] {
			m, ok := v.(map[string]any)
			if !ok {
				return
			}
			next := m[np[0].field]
			if !np[0].each {
				rec(next, np[1:], kp[1:])
				return
			}
			list, _ := next.([]any)
			for _, e := range list {
				rec(e, np[1:], kp[1:])
			}
			return
		}
		names := field{path: np, def: name.def}.values(v)
		k := ""
		if key != nil {
			if ks := (field{path: kp, def: key.def}).values(v); len(ks) > 0 {
				k = ks[0]
			}
			// A key path with nothing there and no default: the key is not
			// known, so every key counts.
		}
		for _, n := range names {
			out = append(out, pair{n, k})
		}
	}
	var kp []segment
	if key != nil {
		kp = key.path
	}
	rec(obj, name.path, kp)
	return out
}
