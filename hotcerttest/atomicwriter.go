package hotcerttest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Names used by the kubelet inside a projected volume directory.
const (
	// DataDirName is the symlink to the current timestamped directory; the
	// user-visible files are symlinks through it ("tls.crt -> ..data/tls.crt").
	DataDirName = "..data"
	// NewDataDirName is the temporary symlink renamed over [DataDirName].
	NewDataDirName = "..data_tmp"
	// tsDirPattern is the os.MkdirTemp prefix of a timestamped directory
	// ("..2006_01_02_15_04_05.<random>"), in UTC.
	tsDirPattern = "..2006_01_02_15_04_05."
)

// AtomicWriter projects a set of files into a directory exactly like the
// kubelet's AtomicWriter (kubernetes pkg/volume/util/atomic_writer.go) updates
// a Secret or ConfigMap volume, for flat payloads (no subdirectories).
//
// The real files live in a hidden timestamped directory such as
// "..2026_08_20_10_00_00.123456"; DataDirName ("..data") is a symlink to it and
// every user-visible name is a symlink "name -> ..data/name". A Write renames a
// new "..data_tmp" symlink over "..data", so all files change at once, a
// reader never sees a partly written file, and os.Lstat of a visible name never
// changes. An AtomicWriter is safe for concurrent use (calls are serialized).
type AtomicWriter struct {
	dir        string
	now        func() time.Time
	keepOld    bool
	beforeSwap func()
	mu         sync.Mutex
}

// A WriterOption configures an [AtomicWriter].
type WriterOption interface {
	applyWriter(*AtomicWriter)
}

type writerOptionFunc func(*AtomicWriter)

func (f writerOptionFunc) applyWriter(w *AtomicWriter) { f(w) }

// WithKeepOld, when keep is true, skips the final step of a Write, the removal of the
// previous timestamped directory, so a watcher of the old files gets no
// REMOVE event.
func WithKeepOld(keep bool) WriterOption {
	return writerOptionFunc(func(w *AtomicWriter) { w.keepOld = keep })
}

// WithBeforeSwap sets a function called during each Write that changes
// content, after the new timestamped directory and the "..data_tmp" symlink are
// complete and right before the rename over "..data". The hook must not call
// Write on the same AtomicWriter.
func WithBeforeSwap(f func()) WriterOption {
	return writerOptionFunc(func(w *AtomicWriter) { w.beforeSwap = f })
}

// WithWriterNow sets the clock used to name timestamped directories. A nil
// function means time.Now.
func WithWriterNow(now func() time.Time) WriterOption {
	return writerOptionFunc(func(w *AtomicWriter) {
		if now == nil {
			now = time.Now
		}
		w.now = now
	})
}

// NewAtomicWriter returns an AtomicWriter for dir, creating dir (mode 0755) if
// it does not exist.
func NewAtomicWriter(dir string, opts ...WriterOption) (*AtomicWriter, error) {
	if dir == "" {
		return nil, errors.New("hotcerttest: new atomic writer: empty directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("hotcerttest: new atomic writer: %w", err)
	}
	w := &AtomicWriter{dir: dir, now: time.Now}
	for _, o := range opts {
		if o != nil {
			o.applyWriter(w)
		}
	}
	return w, nil
}

// MustNewAtomicWriter is like [NewAtomicWriter] but panics on error.
func MustNewAtomicWriter(dir string, opts ...WriterOption) *AtomicWriter {
	return must(NewAtomicWriter(dir, opts...))
}

// Dir returns the target directory.
func (w *AtomicWriter) Dir() string { return w.dir }

// Write projects payload (file name -> content, files 0644) into the
// directory, following the kubelet's steps. If the directory already holds
// exactly this payload (same names, same bytes), Write only recreates missing
// visible symlinks and returns changed == false: no new directory, no swap, no
// directory events. Names must be plain file names: not empty, without '/',
// and not starting with "..".
func (w *AtomicWriter) Write(payload map[string][]byte) (changed bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() {
		if err != nil {
			err = fmt.Errorf("hotcerttest: atomic write %s: %w", w.dir, err)
		}
	}()

	// (1) Validate the payload.
	for name := range payload {
		if err := validateName(name); err != nil {
			return false, err
		}
	}

	// (2) Find the current timestamped directory through the ..data link.
	dataDirPath := filepath.Join(w.dir, DataDirName)
	oldTsDir, err := os.Readlink(dataDirPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	oldTsPath := oldTsDir
	if oldTsDir != "" && !filepath.IsAbs(oldTsDir) {
		oldTsPath = filepath.Join(w.dir, oldTsDir)
	}

	var toRemove []string
	shouldWrite := true
	if oldTsDir != "" {
		// (3) Names in the old version that the payload no longer has.
		if toRemove, err = pathsToRemove(payload, oldTsPath); err != nil {
			return false, err
		}
		// (4) Skip everything if nothing changed.
		should, err := shouldWritePayload(payload, oldTsPath)
		if err != nil {
			return false, err
		}
		if !should && len(toRemove) == 0 {
			shouldWrite, oldTsDir = false, ""
		}
	}

	if shouldWrite {
		// (5) Create the new timestamped directory.
		tsDir, err := os.MkdirTemp(w.dir, w.now().UTC().Format(tsDirPattern))
		if err != nil {
			return false, err
		}
		if err := os.Chmod(tsDir, 0o755); err != nil {
			return false, err
		}
		tsDirName := filepath.Base(tsDir)

		// (6) Write the payload into it.
		if err := writePayload(payload, tsDir); err != nil {
			return false, err
		}

		// (8) Point ..data_tmp at it.
		newDataDirPath := filepath.Join(w.dir, NewDataDirName)
		if err := os.Symlink(tsDirName, newDataDirPath); err != nil {
			_ = os.RemoveAll(tsDir)
			return false, err
		}
		if w.beforeSwap != nil {
			w.beforeSwap()
		}

		// (9) Rename ..data_tmp over ..data: the atomic step.
		if err := os.Rename(newDataDirPath, dataDirPath); err != nil {
			_ = os.Remove(newDataDirPath)
			_ = os.RemoveAll(tsDir)
			return false, err
		}
	}

	// (10) Create the user-visible symlinks that are missing.
	for _, name := range sortedNames(payload) {
		visible := filepath.Join(w.dir, name)
		if _, err := os.Readlink(visible); errors.Is(err, fs.ErrNotExist) {
			if err := os.Symlink(filepath.Join(DataDirName, name), visible); err != nil {
				return shouldWrite, err
			}
		}
	}

	// (11) Remove the visible names that are no longer in the payload.
	var lastErr error
	for _, name := range toRemove {
		if err := os.Remove(filepath.Join(w.dir, name)); err != nil {
			lastErr = err
		}
	}
	if lastErr != nil {
		return shouldWrite, lastErr
	}

	// (12) Remove the previous timestamped directory.
	if oldTsDir != "" && !w.keepOld {
		if err := os.RemoveAll(oldTsPath); err != nil {
			return shouldWrite, err
		}
	}
	return shouldWrite, nil
}

// MustWrite is like [AtomicWriter.Write] but panics on error.
func (w *AtomicWriter) MustWrite(payload map[string][]byte) (changed bool) {
	return must(w.Write(payload))
}

func validateName(name string) error {
	switch {
	case name == "" || name == ".":
		return fmt.Errorf("invalid file name %q", name)
	case strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator):
		return fmt.Errorf("invalid file name %q: must not contain a path separator", name)
	case strings.HasPrefix(name, ".."):
		return fmt.Errorf("invalid file name %q: must not start with '..'", name)
	case len(name) > 255:
		return fmt.Errorf("invalid file name %.20q...: longer than 255 bytes", name)
	}
	return nil
}

// pathsToRemove lists the entries of the old timestamped directory that are
// not in payload.
func pathsToRemove(payload map[string][]byte, oldTsPath string) ([]string, error) {
	entries, err := os.ReadDir(oldTsPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if _, ok := payload[e.Name()]; !ok {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// shouldWritePayload reports whether any payload file is missing from the old
// timestamped directory or has different content there.
func shouldWritePayload(payload map[string][]byte, oldTsPath string) (bool, error) {
	for name, data := range payload {
		p := filepath.Join(oldTsPath, name)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
		onDisk, err := os.ReadFile(p)
		if err != nil {
			return false, err
		}
		if !bytes.Equal(data, onDisk) {
			return true, nil
		}
	}
	return false, nil
}

func writePayload(payload map[string][]byte, dir string) error {
	for _, name := range sortedNames(payload) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, payload[name], 0o644); err != nil {
			return err
		}
		// Like the kubelet: the mode must not depend on the umask.
		if err := os.Chmod(p, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func sortedNames(payload map[string][]byte) []string {
	return slices.Sorted(maps.Keys(payload))
}
