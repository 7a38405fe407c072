package demo

import (
	"slices"
	"sync"
	"time"
)

// MarkKind classifies a timeline mark.
type MarkKind string

// Kinds of marks drawn on the timeline.
const (
	MarkPhase        MarkKind = "phase"         // a phase starts
	MarkReload       MarkKind = "reload"        // a replica serves new material
	MarkBundleReload MarkKind = "bundle-reload" // an agent loaded a new CA bundle
	MarkFailure      MarkKind = "refused"       // a reload was refused (last good kept), or a token refused
	MarkForced       MarkKind = "forced"        // the demo dropped every connection (as a restart would)
	MarkDrain        MarkKind = "drain"         // replicas move their agents with a graceful drain
	MarkKeys         MarkKind = "keys"          // a step of the signing-key rotation
)

// Sample is the state of the fleet at one instant.
type Sample struct {
	At time.Duration
	// Served counts connected agents by the server certificate of their stream.
	Served map[string]int
	// Trusted counts agents by the CA bundle they trust.
	Trusted map[string]int
	// Disconnected counts agents without a stream.
	Disconnected int
	// Issuers counts replicas by the CA that issued the leaf they serve.
	Issuers          map[string]int
	HandshakesOK     uint64 // cumulative
	HandshakesFailed uint64 // cumulative
}

// Mark is an event drawn on the timeline.
type Mark struct {
	At    time.Duration
	Kind  MarkKind
	Label string
	// Phase is the phase the mark happened in ("" before the first).
	Phase string
}

// Timeline records samples and marks and draws them as a self-contained SVG.
type Timeline struct {
	start   time.Time
	mu      sync.Mutex
	samples []Sample
	marks   []Mark
	phase   string
	// certs, bundles and issuers are the band labels in order of first appearance.
	certs, bundles, issuers []string
	// refused are certificates a replica refused, with why: the legend names those
	// never served, which have no band.
	refused []refusal
}

// refusal is a certificate a replica refused, and why.
type refusal struct{ name, why string }

// NewTimeline starts a timeline at now.
func NewTimeline() *Timeline { return &Timeline{start: time.Now()} }

// Sample records the state of the fleet.
func (t *Timeline) Sample(s Sample) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.At = time.Since(t.start)
	for _, k := range sortedKeys(s.Served) {
		if !slices.Contains(t.certs, k) {
			t.certs = append(t.certs, k)
		}
	}
	for _, k := range sortedKeys(s.Trusted) {
		if !slices.Contains(t.bundles, k) {
			t.bundles = append(t.bundles, k)
		}
	}
	for _, k := range sortedKeys(s.Issuers) {
		if !slices.Contains(t.issuers, k) {
			t.issuers = append(t.issuers, k)
		}
	}
	t.samples = append(t.samples, s)
}

// Mark records an event; a MarkPhase mark starts a phase.
func (t *Timeline) Mark(kind MarkKind, label string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if kind == MarkPhase {
		t.phase = label
	}
	t.marks = append(t.marks, Mark{At: time.Since(t.start), Kind: kind, Label: label, Phase: t.phase})
}

// Refused records that a replica refused the server certificate the timeline names
// name, and why: the legend says so when it was never served (it has no band, and
// the certificates' numbering skips it).
func (t *Timeline) Refused(name, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refused = append(t.refused, refusal{name: name, why: why})
}

// Marks returns a copy of the marks recorded so far.
func (t *Timeline) Marks() []Mark {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.marks)
}

// snapshot returns copies of everything WriteSVG draws.
func (t *Timeline) snapshot() (samples []Sample, marks []Mark, certs, bundles, issuers []string, refused []refusal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.samples), slices.Clone(t.marks), slices.Clone(t.certs), slices.Clone(t.bundles), slices.Clone(t.issuers), slices.Clone(t.refused)
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
