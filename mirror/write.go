package mirror

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tmpMarker is in the name of every temporary file a Mirror writes (after a
// leading dot and the target's name: ".tls.crt.hotcert-tmp-123"), so that watchers
// that skip hidden files skip them, and stale ones left by a crash are removed.
const tmpMarker = ".hotcert-tmp-"

// writeFiles writes outs into dir the way a file watcher sees a change: each to a
// temporary file in dir (so the rename stays in one filesystem), synced and
// closed, then renamed over its name, in order, and dir synced once the renames
// are done. A failure before the first rename leaves every file as it was; the
// temporary files are removed.
func writeFiles(dir string, outs []output) (err error) {
	tmps := make([]string, 0, len(outs))
	defer func() {
		if err != nil {
			for _, t := range tmps {
				_ = os.Remove(t)
			}
		}
	}()
	for _, o := range outs {
		t, err := writeTemp(dir, o)
		if t != "" {
			tmps = append(tmps, t)
		}
		if err != nil {
			return err
		}
	}
	for i, o := range outs {
		if err := os.Rename(tmps[i], filepath.Join(dir, o.name)); err != nil {
			return fileError("renaming into", o.name, err)
		}
		tmps[i] = "" // renamed: nothing to remove
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("mirror: syncing %s: %w", dir, err)
	}
	return nil
}

// writeTemp writes o to a new temporary file of dir with o's mode and returns its path.
func writeTemp(dir string, o output) (string, error) {
	f, err := os.CreateTemp(dir, "."+o.name+tmpMarker+"*")
	if err != nil {
		return "", fileError("creating a temporary file for", o.name, err)
	}
	name := f.Name()
	// Chmod, not the umask-filtered mode of an open: the mode is what was asked.
	err = f.Chmod(o.mode)
	if err == nil {
		_, err = f.Write(o.data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return name, fileError("writing", o.name, err)
	}
	return name, nil
}

// fileError says what failed for which file of the directory, without the
// temporary file's random name: the same failure on a retry has the same
// message, and is reported once.
func fileError(op, name string, err error) error {
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return fmt.Errorf("mirror: %s %s: %w", op, name, err)
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// removeStaleTemps removes the temporary files a Mirror left in dir when it was
// stopped between writing and renaming them.
func removeStaleTemps(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, ".") && strings.Contains(n, tmpMarker) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("mirror: %w", err)
			}
		}
	}
	return nil
}
