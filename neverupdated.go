package hotcert

// NeverUpdated is implemented by a [Source] that can tell that some of its
// inputs will never change where it reads them: a file that a Kubernetes
// subPath mount bind-mounted once, when the container started (package
// source/file). A rotation then reaches the process only when it restarts. The
// Reloader reports them once, after its first load, to an Observer that
// implements [NeverUpdatedObserver].
type NeverUpdated interface {
	// NeverUpdated names the inputs (file paths) that never change.
	NeverUpdated() []string
}

// NeverUpdatedObserver is an [Observer] that is told, once per Reloader, which
// inputs of its source will never be updated (none is an empty list). The
// metrics package's Recorder implements it.
type NeverUpdatedObserver interface {
	ObserveNeverUpdated(component string, inputs []string)
}

// neverUpdated returns the inputs of src that never change, and whether src
// can tell.
func neverUpdated(src Source) ([]string, bool) {
	if n, ok := src.(NeverUpdated); ok {
		return n.NeverUpdated(), true
	}
	return nil, false
}

// NeverUpdated implements [NeverUpdated] for the sides that do.
func (c *composite) NeverUpdated() []string {
	a, _ := neverUpdated(c.identity)
	b, _ := neverUpdated(c.trust)
	return append(a, b...)
}
