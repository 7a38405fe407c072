package file

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/hotcert/hotcert"
)

// dataLink is the symlink the kubelet swaps atomically on every update.
const dataLink = "..data"

// maxGenerationRetries bounds how often a read is repeated because "..data" moved
// while the files were being read.
const maxGenerationRetries = 5

// readGeneration reads the given files so that files sharing a kubelet-managed
// directory come from one "..data" generation: it notes where "..data" points before
// and after reading, and reads again if a swap happened in between.
func (s *Source) readGeneration(paths ...string) ([]hotcert.Input, error) {
	var (
		ins []hotcert.Input
		err error
	)
	for range maxGenerationRetries {
		before := Generations(paths)
		ins, err = s.readAll(paths)
		if slices.Equal(before, Generations(paths)) {
			return ins, err
		}
	}
	return ins, err
}

func (s *Source) readAll(paths []string) ([]hotcert.Input, error) {
	ins := make([]hotcert.Input, len(paths))
	for i, p := range paths {
		if p == "" {
			continue
		}
		data, err := s.readFile(p)
		if err != nil {
			return nil, err
		}
		ins[i] = hotcert.Input{Name: p, Data: data}
	}
	return ins, nil
}

// Generations returns, for each path, where the "..data" symlink of its directory
// points ("" when there is none). Reading files between two equal results reads them
// from one kubelet generation.
func Generations(paths []string) []string {
	gens := make([]string, len(paths))
	for i, p := range paths {
		if p != "" {
			gens[i], _ = os.Readlink(filepath.Join(filepath.Dir(p), dataLink))
		}
	}
	return gens
}

func (s *Source) readFile(path string) ([]byte, error) { return ReadFile(path, s.maxSize) }

// ReadFile reads a regular file (following symlinks) of at most maxSize bytes, as the
// Source does. A directory, a device such as /dev/zero or a FIFO is refused before it
// is read, and the size cap holds even for a file that grows while it is read. Errors
// are *hotcert.Error values naming the path (reasons missing, read, not_regular,
// too_large). Other sources of files (e.g. JWT key directories) use it too.
func ReadFile(path string, maxSize int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &hotcert.Error{Input: path, Reason: hotcert.ReasonMissing, Detail: "does not exist"}
		}
		return nil, &hotcert.Error{Input: path, Reason: hotcert.ReasonRead, Detail: "cannot be opened", Err: unwrapPath(err)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &hotcert.Error{Input: path, Reason: hotcert.ReasonRead, Detail: "cannot be stat'ed", Err: unwrapPath(err)}
	}
	if !st.Mode().IsRegular() {
		what := "not a regular file"
		if st.IsDir() {
			what = "a directory, not a file"
		}
		return nil, &hotcert.Error{Input: path, Reason: hotcert.ReasonNotRegular, Detail: "is " + what}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, &hotcert.Error{Input: path, Reason: hotcert.ReasonRead, Detail: "cannot be read", Err: unwrapPath(err)}
	}
	if int64(len(data)) > maxSize {
		return nil, &hotcert.Error{Input: path, Reason: hotcert.ReasonTooLarge, Detail: "is larger than the size cap of " + strconv.FormatInt(maxSize, 10) + " bytes"}
	}
	return data, nil
}

// unwrapPath drops the *fs.PathError wrapper: the path is already the Error's Input.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
