// Package state reads and writes what the rollout controller remembers about a
// workload in the workload's own annotations.
package state

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/naming"
)

// timeLayout formats rollout.AnnotationLastRollout: RFC 3339, UTC, milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// State is what the controller remembers about a workload, kept in annotations on
// the workload's metadata (see [rollout.AnnotationAppliedHash], [rollout.AnnotationAppliedKeys],
// [rollout.AnnotationLastRollout]) so that it survives controller restarts and leader
// changes. Writing it never rolls the workload.
type State struct {
	// AppliedHash is the hash of the consumed content the pod template reflects;
	// empty until the workload is adopted.
	AppliedHash string
	// Keys are the recorded per-object and per-key digests ([rollout.Config.Entries]);
	// nil when absent or unreadable.
	Keys map[string]string
	// LastRollout is when the controller last rolled the workload; zero if never.
	LastRollout time.Time
	// Running is the validity of the leaf certificate the pods run (the
	// consumed content's at the last rollout or adoption); zero if unknown.
	Running rollout.Validity
	// Rotated is the last rotate-now token honoured.
	Rotated string
}

// Of reads the state from a workload's annotations. Unreadable values are
// treated as absent.
func Of(annotations map[string]string) State {
	s := State{AppliedHash: annotations[rollout.AnnotationAppliedHash]}
	if v := annotations[rollout.AnnotationAppliedKeys]; v != "" {
		var keys map[string]string
		if json.Unmarshal([]byte(v), &keys) == nil {
			s.Keys = keys
		}
	}
	if v := annotations[rollout.AnnotationLastRollout]; v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			s.LastRollout = t
		}
	}
	if from, to, ok := strings.Cut(annotations[rollout.AnnotationRunningValidity], "/"); ok {
		nb, err1 := time.Parse(time.RFC3339, from)
		na, err2 := time.Parse(time.RFC3339, to)
		if err1 == nil && err2 == nil && na.After(nb) {
			s.Running = rollout.Validity{NotBefore: nb, NotAfter: na}
		}
	}
	s.Rotated = annotations[rollout.AnnotationRotated]
	return s
}

// Adopted reports whether a baseline has been recorded.
func (s State) Adopted() bool { return s.AppliedHash != "" }

// Applied returns the state once cfg is applied, without a rollout (adoption, or a
// pod-template edit that only changed what is referenced).
func (s State) Applied(cfg *rollout.Config) State {
	return State{AppliedHash: cfg.Hash, Keys: cfg.Entries, LastRollout: s.LastRollout, Running: cfg.Leaf, Rotated: s.Rotated}
}

// Rolled returns the state once the workload is rolled to cfg at t.
func (s State) Rolled(cfg *rollout.Config, t time.Time) State {
	return State{AppliedHash: cfg.Hash, Keys: cfg.Entries, LastRollout: t, Running: cfg.Leaf, Rotated: s.Rotated}
}

// Annotations returns the annotations that record s (absent values are empty
// strings, for the caller to delete).
func (s State) Annotations() map[string]string {
	out := map[string]string{rollout.AnnotationAppliedHash: s.AppliedHash, rollout.AnnotationAppliedKeys: "", rollout.AnnotationLastRollout: ""}
	if s.Keys != nil {
		b, _ := json.Marshal(s.Keys) // a map of strings always marshals
		out[rollout.AnnotationAppliedKeys] = string(b)
	}
	if !s.LastRollout.IsZero() {
		out[rollout.AnnotationLastRollout] = s.LastRollout.UTC().Format(timeLayout)
	}
	out[rollout.AnnotationRunningValidity] = ""
	if !s.Running.IsZero() {
		out[rollout.AnnotationRunningValidity] = s.Running.NotBefore.UTC().Format(time.RFC3339) + "/" + s.Running.NotAfter.UTC().Format(time.RFC3339)
	}
	out[rollout.AnnotationRotated] = s.Rotated
	return out
}

// Change is one difference between the recorded state and the current content.
type Change struct {
	Kind rollout.Kind
	Name string
	// Key is empty for a change of the whole object.
	Key string
	// What is "changed", "added" or "removed" for a key, "created" or "deleted"
	// for an optional object, or "changed" for content without a per-key record.
	What string
}

func (c Change) String() string {
	switch {
	case c.Name == "":
		return "consumed content " + c.What
	case c.Key == "":
		return fmt.Sprintf("%s %s %s", c.Kind, naming.Display(c.Name), c.What)
	default:
		return fmt.Sprintf("%s %s key %s %s", c.Kind, naming.Display(c.Name), c.Key, c.What)
	}
}

// Comparable reports whether the recorded digests were made with the same hash
// key as cfg's: when they were not (the key changed), Changes would see every
// value as changed.
func (s State) Comparable(cfg *rollout.Config) bool {
	return s.Keys == nil || s.Keys[naming.KeyIDEntry] == cfg.Entries[naming.KeyIDEntry]
}

// Changes returns the content changes between the recorded state and cfg: the
// objects and keys recorded in both whose values differ, and the keys added to or
// removed from an object whose keys are all consumed. An object or key only one
// side knows is a change of what the pod template references, which rolls the
// workload by itself, so it is not a content change. Without a per-key record, a
// different hash is one change.
func (s State) Changes(cfg *rollout.Config) []Change {
	if s.Keys == nil {
		if s.AppliedHash != "" && s.AppliedHash != cfg.Hash {
			return []Change{{What: "changed"}}
		}
		return nil
	}
	var out []Change
	for _, name := range sortedKeys(cfg.Entries) {
		cur := cfg.Entries[name]
		old, ok := s.Keys[name]
		// Ignored content (see Ignored) never rolls; content that counts
		// again is compared with what was last seen of it.
		old = strings.TrimPrefix(old, naming.Ignored)
		if !ok || old == cur || strings.HasPrefix(name, "#") || ignored(cur) {
			continue
		}
		kind, obj, key := splitEntry(name)
		if key != "" {
			// Reported with its object when the object appeared or went.
			if o := s.Keys[string(kind)+"/"+obj]; o == "-" || cfg.Entries[string(kind)+"/"+obj] == "-" {
				continue
			}
			what := "changed"
			switch {
			case old == "-":
				what = "added"
			case cur == "-":
				what = "removed"
			}
			out = append(out, Change{Kind: kind, Name: obj, Key: key, What: what})
			continue
		}
		switch {
		case old == "-":
			out = append(out, Change{Kind: kind, Name: obj, What: "created"})
		case cur == "-":
			out = append(out, Change{Kind: kind, Name: obj, What: "deleted"})
		default:
			// The set of keys of a fully consumed object changed: name them.
			prefix := name + "/"
			for _, e := range sortedKeys(cfg.Entries) {
				if k, ok := strings.CutPrefix(e, prefix); ok && !ignored(cfg.Entries[e]) {
					if _, had := s.Keys[e]; !had {
						out = append(out, Change{Kind: kind, Name: obj, Key: k, What: "added"})
					}
				}
			}
			for _, e := range sortedKeys(s.Keys) {
				if k, ok := strings.CutPrefix(e, prefix); ok && !ignored(s.Keys[e]) {
					if _, has := cfg.Entries[e]; !has {
						out = append(out, Change{Kind: kind, Name: obj, Key: k, What: "removed"})
					}
				}
			}
		}
	}
	return out
}

func splitEntry(name string) (kind rollout.Kind, obj, key string) {
	k, rest, _ := strings.Cut(name, "/")
	obj, key, _ = strings.Cut(rest, "/")
	return rollout.Kind(k), obj, key
}

// Describe joins changes for an Event message, at most max of them.
func Describe(changes []Change, max int) string {
	var b strings.Builder
	for i, c := range changes {
		if i == max {
			fmt.Fprintf(&b, " and %d more", len(changes)-max)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.String())
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.SortedFunc(maps.Keys(m), cmp.Compare[string])
}
