package file

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hotcert/hotcert"
)

// dataLink is the symlink the kubelet swaps atomically on every update.
const dataLink = "..data"

// maxGenerationReads bounds how often a read is repeated because a "..data" moved
// while the files were being read. A kubelet swaps a volume once per update, so
// this is only reached by a writer swapping without pause; the read then fails (and
// is retried by the reloader) rather than return files of different updates.
const maxGenerationReads = 8

// readGeneration reads every file of the Set so that files sharing a kubelet-managed
// directory come from one "..data" generation: it notes where each directory's
// "..data" points before and after reading all files, and reads again if any swap
// happened in between. One pass covers every file — reading the key pair and the
// bundle of one volume in two passes would let a swap land between them.
func (s *Set) readGeneration() ([]hotcert.Input, error) {
	for range maxGenerationReads {
		before := s.generations()
		ins, err := s.readAll()
		if slices.Equal(before, s.generations()) {
			return ins, err
		}
	}
	return nil, &hotcert.Error{Input: strings.Join(s.dirs(), ", "), Reason: hotcert.ReasonRead,
		Detail: "changed " + strconv.Itoa(maxGenerationReads) + " times while being read; trying again later"}
}

func (s *Set) readAll() ([]hotcert.Input, error) {
	ins := make([]hotcert.Input, len(s.files))
	for i, f := range s.files {
		if f.Path == "" {
			continue
		}
		data, err := readFile(f.Path, s.maxSize)
		if err != nil {
			var he *hotcert.Error
			if f.Optional && errors.As(err, &he) && he.Reason == hotcert.ReasonMissing {
				continue
			}
			return nil, err
		}
		ins[i] = hotcert.Input{Name: f.Path, Data: data}
	}
	return ins, nil
}

// generations returns, for each directory of the Set, where its "..data" symlink
// points ("" when there is none).
func (s *Set) generations() []string {
	dirs := s.dirs()
	gens := make([]string, len(dirs))
	for i, d := range dirs {
		gens[i], _ = os.Readlink(filepath.Join(d, dataLink))
	}
	return gens
}

// readFile reads a regular file (following symlinks) of at most maxSize bytes. A
// directory, a device such as /dev/zero or a FIFO is refused before it is read, and
// the size cap holds even for a file that grows while it is read. Errors are
// *hotcert.Error values naming the path (reasons missing, read, not_regular,
// too_large).
func readFile(path string, maxSize int64) ([]byte, error) {
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
