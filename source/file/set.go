package file

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hotcert/hotcert"
)

// A File is one file of a [Set].
type File struct {
	// Path is where the file is. An empty Path leaves its input absent.
	Path string
	// Optional makes a file that does not exist read as an absent input instead of
	// an error (e.g. a list of extra keys a Secret may not have).
	Optional bool
}

// Set is a fixed list of files read as one and watched as one, whatever they hold:
// the mechanism under [Source], and under other content kept in files (JWT key
// directories, package jwtkeys/jwtfile). Every read takes all files from one kubelet
// "..data" generation of each directory, refuses anything but a regular file of at
// most the size cap, and names the file in its errors. Create it with [NewSet].
type Set struct {
	files   []File
	maxSize int64
	rewatch time.Duration
	logger  *slog.Logger                // given by WithLogger; nil if none was
	handed  atomic.Pointer[slog.Logger] // a Reloader's, handed by SetDefaultLogger
	// neverUpdated are the files a Kubernetes subPath mount put in place, and
	// subPaths their mounts, logged once, by the first logger the Set has.
	neverUpdated []string
	subPaths     []subPathMount
	subPathsSaid atomic.Bool
}

// NewSet returns a Set of files, read and watched as opts say.
func NewSet(files []File, opts ...SetOption) (*Set, error) {
	c := defaultSetConfig()
	for _, o := range opts {
		o.applySet(&c)
	}
	return newSet(files, c)
}

func defaultSetConfig() setConfig {
	return setConfig{
		maxSize:   hotcert.DefaultMaxInputSize,
		rewatch:   DefaultRewatchInterval,
		mountInfo: defaultMountInfo,
	}
}

func newSet(files []File, c setConfig) (*Set, error) {
	if c.maxSize <= 0 {
		return nil, fmt.Errorf("file: size cap must be positive, got %d", c.maxSize)
	}
	if !slices.ContainsFunc(files, func(f File) bool { return f.Path != "" }) {
		return nil, errors.New("file: a set needs at least one file")
	}
	s := &Set{files: slices.Clone(files), maxSize: c.maxSize, rewatch: c.rewatch, logger: c.logger}
	s.findSubPathMounts(c.mountInfo)
	if s.logger != nil {
		s.saySubPathMounts()
	}
	return s, nil
}

// discard is the logger of a Set given none and run by no Reloader.
var discard = slog.New(slog.DiscardHandler)

// log returns the logger of the Set's lines: its own, else its Reloader's.
func (s *Set) log() *slog.Logger {
	if s.logger != nil {
		return s.logger
	}
	if l := s.handed.Load(); l != nil {
		return l
	}
	return discard
}

// SetDefaultLogger implements hotcert.SourceLogger: the Set's lines (a watch
// lost, a subPath mount) go to l unless [WithLogger] gave a logger. A Set with no
// logger of its own says its subPath mounts here, once.
func (s *Set) SetDefaultLogger(l *slog.Logger) {
	if s.logger != nil || l == nil {
		return
	}
	s.handed.Store(l)
	s.saySubPathMounts()
}

// findSubPathMounts looks the files up in the mount table at path and keeps
// each one that a subPath mount put in place. A table that cannot be read (not
// Linux, no /proc) finds none.
func (s *Set) findSubPathMounts(path string) {
	paths := make([]string, 0, len(s.files))
	for _, f := range s.files {
		paths = append(paths, f.Path)
	}
	mounts, err := readMountInfo(path)
	if err != nil {
		s.log().Debug("file: mount table unreadable; not looking for subPath mounts", "mountinfo", path, "error", err.Error())
		return
	}
	s.subPaths = subPathMounts(paths, mounts)
	for _, m := range s.subPaths {
		s.neverUpdated = append(s.neverUpdated, m.file)
	}
}

// saySubPathMounts logs each subPath-mounted file, once per Set.
func (s *Set) saySubPathMounts() {
	if s.subPathsSaid.Swap(true) {
		return
	}
	for _, m := range s.subPaths {
		s.log().Warn("file is a subPath mount and will never be updated; mount its volume's directory instead",
			"source", s.String(), "file", m.file, "mount_point", m.mount.point, "mount_root", m.mount.root)
	}
}

// NeverUpdated returns the files of the Set that will never change where they
// are read: a Kubernetes subPath mount bind-mounted them (or a directory above
// them) once, when the container started, so an update of their Secret or
// ConfigMap never reaches them and only a restart does. It implements
// [hotcert.NeverUpdated]; New logs each of them once.
func (s *Set) NeverUpdated() []string { return slices.Clone(s.neverUpdated) }

// Read returns one input per file of the Set, in order: absent for an empty path
// and for a missing optional file. It reads every file from one "..data"
// generation of its directory, so files that share a kubelet volume (tls.crt,
// tls.key and ca.crt of one Secret) are always of one update. Errors are
// *hotcert.Error values naming the file.
func (s *Set) Read() ([]hotcert.Input, error) { return s.readGeneration() }

// String lists the files, e.g. "files /keys/signing.key /keys/verify.pem".
func (s *Set) String() string {
	var b strings.Builder
	b.WriteString("files")
	for _, f := range s.files {
		if f.Path != "" {
			b.WriteString(" " + f.Path)
		}
	}
	return b.String()
}

// dirs returns the distinct directories holding the files.
func (s *Set) dirs() []string {
	var ds []string
	for _, f := range s.files {
		if f.Path == "" {
			continue
		}
		if d := filepath.Clean(filepath.Dir(f.Path)); !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	return ds
}
