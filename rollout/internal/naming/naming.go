// Package naming is how the rollout packages spell what they record and
// report: the name of an object of another namespace than the workload's, and
// the special entries and marks of rollout.Config.Entries (which the
// hotcert.dev/applied-keys annotation records). rollout computes them,
// rollout/internal/state compares them, the controller reports them.
package naming

import "strings"

// Foreign is how a Ref, a Lookup, Config.Entries and a Change name an object
// of another namespace than the workload's (a custom resource chain can lead
// there): "namespace:name". Kubernetes names and data keys never hold a colon,
// so it cannot be read two ways, and the recorded entries keep their
// "Kind/name/key" shape.
func Foreign(namespace, name string) string { return namespace + ":" + name }

// Split returns the namespace and name a Ref's Name stands for in a workload
// of namespace ns (see Foreign).
func Split(ns, name string) (namespace, objName string) {
	if before, after, ok := strings.Cut(name, ":"); ok {
		return before, after
	}
	return ns, name
}

// Display shows a Ref's Name for messages: a foreign name (see Foreign) as
// namespace/name.
func Display(name string) string { return strings.Replace(name, ":", "/", 1) }

// Ignored starts the value of an entry of Config.Entries that an exception
// annotation leaves out of the hash (see rollout.Exceptions): the rest of the
// value is what it would be without the annotation, so that a change of
// ignored content can still be told and reported.
const Ignored = "!"

// KeyIDEntry is the entry of Config.Entries that identifies the hash key (see
// rollout.WithHashKey): "none", or a short digest of the key. When it differs
// from the recorded one, digests cannot be compared and the workload is
// re-adopted without a rollout.
const KeyIDEntry = "#key"
