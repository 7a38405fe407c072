package state

import (
	"maps"
	"strings"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/naming"
)

// What values of the Changes that Ignored returns.
const (
	// IgnoredChanged: ignored content changed; nothing rolls.
	IgnoredChanged = "changed, ignored"
	// IgnoredAdded, IgnoredRemoved: an ignored key of a wholly consumed
	// object appeared or went; nothing rolls.
	IgnoredAdded   = "added, ignored"
	IgnoredRemoved = "removed, ignored"
	// IgnoredFromNow: an exception annotation now ignores the object or key.
	IgnoredFromNow = "ignored from now on"
	// IgnoredNoLonger: the annotation was removed or narrowed; the object or
	// key counts again, with the content last seen of it (other content is a
	// change, and rolls).
	IgnoredNoLonger = "counts again"
)

func ignored(v string) bool { return strings.HasPrefix(v, naming.Ignored) }

// Ignored returns what the exception annotations of consumed objects account
// for between the recorded state and cfg (see [rollout.Exceptions]): ignored
// objects and keys whose content changed, and objects and keys an annotation
// started or stopped ignoring. None of them rolls anything. A key is reported
// with its object when the whole object is ignored.
func (s State) Ignored(cfg *rollout.Config) []Change {
	if s.Keys == nil {
		return nil
	}
	var out []Change
	for _, name := range sortedKeys(s.Keys) {
		kind, obj, key := splitEntry(name)
		if _, ok := cfg.Entries[name]; !ok && key != "" && ignored(s.Keys[name]) {
			if _, same := cfg.Entries[string(kind)+"/"+obj]; same {
				out = append(out, Change{Kind: kind, Name: obj, Key: key, What: IgnoredRemoved})
			}
		}
	}
	for _, name := range sortedKeys(cfg.Entries) {
		cur := cfg.Entries[name]
		kind, obj, key := splitEntry(name)
		objName := string(kind) + "/" + obj
		old, ok := s.Keys[name]
		if !ok {
			// A key of a wholly consumed object appeared, ignored.
			if _, same := s.Keys[objName]; same && key != "" && ignored(cur) {
				out = append(out, Change{Kind: kind, Name: obj, Key: key, What: IgnoredAdded})
			}
			continue
		}
		if old == cur || !(ignored(old) || ignored(cur)) || (ignored(old) && !ignored(cur) && old != naming.Ignored+cur) {
			// Not ignored, or counting again with other content than
			// last seen: a change (see Changes).
			continue
		}
		if key != "" {
			if o, c := s.Keys[objName], cfg.Entries[objName]; ignored(o) && ignored(c) && o != c {
				continue // reported as the object's change
			} else if ignored(o) != ignored(c) {
				continue // the whole object's exception came or went
			}
		}
		what := IgnoredChanged
		switch {
		case !ignored(old) && naming.Ignored+old == cur:
			what = IgnoredFromNow
		case !ignored(cur):
			what = IgnoredNoLonger
		}
		out = append(out, Change{Kind: kind, Name: obj, Key: key, What: what})
	}
	return out
}

// WithIgnored returns s with what Ignored reports taken as applied: the
// recorded values of ignored content, and of content an annotation started or
// stopped ignoring, become cfg's. Ignored content is recorded as last seen, so
// that its change can be told; when the annotation goes, that is the baseline:
// the removal alone is no change of content and rolls nothing, while content
// that differs from it is a change. When nothing else differs, the whole of
// cfg is the new baseline (its hash, which leaves ignored content out,
// included).
func (s State) WithIgnored(cfg *rollout.Config) State {
	if s.Keys == nil {
		return s
	}
	keys := maps.Clone(s.Keys)
	for name, cur := range cfg.Entries {
		// An ignored key that appeared is recorded too: once it counts
		// again, it is then known, not taken for an added key.
		if old, ok := keys[name]; ok && old == naming.Ignored+cur || ignored(cur) {
			keys[name] = cur
		}
	}
	for name, old := range s.Keys {
		if _, ok := cfg.Entries[name]; !ok && ignored(old) {
			delete(keys, name)
		}
	}
	next := State{AppliedHash: s.AppliedHash, Keys: keys, LastRollout: s.LastRollout, Running: s.Running, Rotated: s.Rotated}
	sameNames := len(keys) == len(cfg.Entries)
	for name := range keys {
		if _, ok := cfg.Entries[name]; !ok {
			sameNames = false
		}
	}
	if sameNames && len(next.Changes(cfg)) == 0 {
		return s.Applied(cfg)
	}
	return next
}
