package clusterview

// Mode is what the view keeps of Secrets and ConfigMaps, and what their watch
// delivers. In every mode the Store keeps only a digest of each consumed value,
// never the data, once it is read.
type Mode int

const (
	// Referenced: the Watcher watches whole objects and digests, as its event
	// arrives, each object a workload references; the others' data is dropped
	// as it is decoded.
	Referenced Mode = iota
	// Metadata: the Watcher watches metadata only; a referenced object's data
	// is read with one GET per new version.
	Metadata
	// Full: the manager's informer cache holds whole objects, and there is no
	// Watcher (the memory benchmark's comparison).
	Full
)
