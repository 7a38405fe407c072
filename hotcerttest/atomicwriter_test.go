package hotcerttest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var tsDirRE = regexp.MustCompile(`^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$`)

func readlinkData(t *testing.T, dir string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(dir, DataDirName))
	if err != nil {
		t.Fatalf("readlink ..data: %v", err)
	}
	if !tsDirRE.MatchString(target) {
		t.Fatalf("..data -> %q is not a timestamped dir name", target)
	}
	return target
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestAtomicWriterLayoutAndSwap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol", "tls") // created by NewAtomicWriter
	w := MustNewAtomicWriter(dir)
	if w.Dir() != dir {
		t.Fatalf("Dir() = %q", w.Dir())
	}
	changed, err := w.Write(map[string][]byte{"tls.crt": []byte("cert1"), "tls.key": []byte("key1")})
	if err != nil || !changed {
		t.Fatalf("first Write = %v, %v", changed, err)
	}
	ts1 := readlinkData(t, dir)
	for _, name := range []string{"tls.crt", "tls.key"} {
		if target, err := os.Readlink(filepath.Join(dir, name)); err != nil || target != filepath.Join(DataDirName, name) {
			t.Fatalf("%s -> %q, %v", name, target, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, ts1)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("ts dir mode: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "tls.crt")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("file mode: %v %v", fi, err)
	}
	if got := readFile(t, filepath.Join(dir, "tls.crt")); got != "cert1" {
		t.Fatalf("tls.crt = %q", got)
	}
	lst1, err := os.Lstat(filepath.Join(dir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(filepath.Join(dir, "tls.crt"))

	changed, err = w.Write(map[string][]byte{"tls.crt": []byte("cert2!"), "tls.key": []byte("key2")})
	if err != nil || !changed {
		t.Fatalf("second Write = %v, %v", changed, err)
	}
	ts2 := readlinkData(t, dir)
	if ts2 == ts1 {
		t.Fatalf("..data still points to %s", ts1)
	}
	if exists(filepath.Join(dir, ts1)) {
		t.Fatalf("old ts dir %s not removed", ts1)
	}
	if exists(filepath.Join(dir, NewDataDirName)) {
		t.Fatalf("%s left behind", NewDataDirName)
	}
	if got := readFile(t, filepath.Join(dir, "tls.crt")); got != "cert2!" {
		t.Fatalf("tls.crt = %q", got)
	}
	// Lstat sees the unchanged symlink; Stat follows it to the new file.
	lst2, _ := os.Lstat(filepath.Join(dir, "tls.crt"))
	st2, _ := os.Stat(filepath.Join(dir, "tls.crt"))
	if !os.SameFile(lst1, lst2) || !lst1.ModTime().Equal(lst2.ModTime()) || lst1.Size() != lst2.Size() {
		t.Fatalf("Lstat changed across a write")
	}
	if os.SameFile(st1, st2) || st2.Size() != int64(len("cert2!")) {
		t.Fatalf("Stat did not change across a write")
	}
	if got, want := entries(t, dir), []string{ts2, DataDirName, "tls.crt", "tls.key"}; !slices.Equal(got, want) {
		t.Fatalf("dir entries %v, want %v", got, want)
	}
}

func TestAtomicWriterIdenticalPayload(t *testing.T) {
	dir := t.TempDir()
	var swaps atomic.Int32
	w := MustNewAtomicWriter(dir, WithBeforeSwap(func() { swaps.Add(1) }))
	payload := map[string][]byte{"ca.crt": []byte("bundle")}
	w.MustWrite(payload)
	ts := readlinkData(t, dir)
	before, _ := os.Lstat(filepath.Join(dir, DataDirName))
	changed, err := w.Write(map[string][]byte{"ca.crt": []byte("bundle")})
	if err != nil || changed {
		t.Fatalf("identical Write = %v, %v", changed, err)
	}
	after, _ := os.Lstat(filepath.Join(dir, DataDirName))
	if readlinkData(t, dir) != ts || !os.SameFile(before, after) || swaps.Load() != 1 {
		t.Fatalf("identical payload touched ..data (swaps %d)", swaps.Load())
	}
	if got := entries(t, dir); len(got) != 3 {
		t.Fatalf("entries %v", got)
	}
	// Like the kubelet (kubernetes#121472), a missing visible link is repaired
	// even without a swap.
	if err := os.Remove(filepath.Join(dir, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	if changed := w.MustWrite(payload); changed || readFile(t, filepath.Join(dir, "ca.crt")) != "bundle" {
		t.Fatalf("visible link not repaired (changed %v)", changed)
	}
	// A subset of the old payload is a change: the dropped key goes away.
	w.MustWrite(map[string][]byte{"ca.crt": []byte("bundle"), "extra": []byte("x")})
	if changed := w.MustWrite(payload); !changed || exists(filepath.Join(dir, "extra")) {
		t.Fatalf("removal not written (changed %v)", changed)
	}
}

func TestAtomicWriterRemovedKeys(t *testing.T) {
	dir := t.TempDir()
	w := MustNewAtomicWriter(dir)
	w.MustWrite(map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k"), "ca.crt": []byte("ca")})
	w.MustWrite(map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")})
	if exists(filepath.Join(dir, "ca.crt")) {
		t.Fatalf("removed key kept its visible symlink")
	}
	if exists(filepath.Join(dir, DataDirName, "ca.crt")) {
		t.Fatalf("removed key still in ..data")
	}
	w.MustWrite(map[string][]byte{"ca.crt": []byte("ca2")})
	if got := entries(t, dir); len(got) != 3 || readFile(t, filepath.Join(dir, "ca.crt")) != "ca2" {
		t.Fatalf("entries %v", got)
	}
	// An empty payload is valid, as in the kubelet: every visible name goes.
	w.MustWrite(map[string][]byte{})
	if got := entries(t, dir); len(got) != 2 {
		t.Fatalf("entries after empty payload %v", got)
	}
}

func TestAtomicWriterKeepOldAndBeforeSwap(t *testing.T) {
	dir := t.TempDir()
	var w *AtomicWriter
	var oldTs string
	var sawTmp bool
	clock := time.Date(2026, 8, 20, 10, 0, 0, 0, time.FixedZone("X", 3600))
	w = MustNewAtomicWriter(dir, WithKeepOld(true), WithWriterNow(func() time.Time { return clock }), WithBeforeSwap(func() {
		if oldTs == "" {
			return
		}
		// Right before the swap: ..data is still the old dir, ..data_tmp is the new one.
		cur, _ := os.Readlink(filepath.Join(dir, DataDirName))
		tmp, err := os.Readlink(filepath.Join(dir, NewDataDirName))
		sawTmp = cur == oldTs && err == nil && tmp != oldTs && readFile(t, filepath.Join(dir, tmp, "f")) == "2"
	}))
	w.MustWrite(map[string][]byte{"f": []byte("1")})
	oldTs = readlinkData(t, dir)
	if !strings.HasPrefix(oldTs, "..2026_08_20_09_00_00.") {
		t.Fatalf("ts dir %q does not use the injected clock in UTC", oldTs)
	}
	w.MustWrite(map[string][]byte{"f": []byte("2")})
	if !sawTmp {
		t.Fatalf("WithBeforeSwap hook did not see the pre-swap state")
	}
	if readlinkData(t, dir) == oldTs || readFile(t, filepath.Join(dir, oldTs, "f")) != "1" {
		t.Fatalf("WithKeepOld: old dir not kept")
	}
}

func TestAtomicWriterInvalidNames(t *testing.T) {
	dir := t.TempDir()
	w := MustNewAtomicWriter(dir)
	for _, name := range []string{"", ".", "a/b", "..data", "..x", "../x", strings.Repeat("a", 256)} {
		changed, err := w.Write(map[string][]byte{name: []byte("x"), "ok": []byte("y")})
		if err == nil || changed || !strings.HasPrefix(err.Error(), "hotcerttest: atomic write ") {
			t.Errorf("name %q: %v, %v", name, changed, err)
		}
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Fatalf("invalid payload wrote %v", got)
	}
	if _, err := NewAtomicWriter(""); err == nil {
		t.Fatalf("empty dir accepted")
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewAtomicWriter(filepath.Join(file, "sub")); err == nil {
		t.Fatalf("dir under a file accepted")
	}
}

// TestAtomicWriterReadersSeeWholeVersions checks the property the scheme
// exists for: a reader going through the visible symlink sees only complete
// versions, and a reader that resolves ..data once sees a consistent pair.
func TestAtomicWriterReadersSeeWholeVersions(t *testing.T) {
	dir := t.TempDir()
	w := MustNewAtomicWriter(dir)
	version := func(i int) map[string][]byte {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, 16<<10)
		return map[string][]byte{"tls.crt": v, "tls.key": v}
	}
	w.MustWrite(version(0))
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() { // through the visible symlink
		defer wg.Done()
		for !stop.Load() {
			b, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
			if errors.Is(err, fs.ErrNotExist) {
				continue // resolved ..data just before a swap, then the old dir went: retry
			}
			if err != nil {
				errc <- err
				return
			}
			if len(b) != 16<<10 || bytes.Count(b, b[:1]) != len(b) {
				errc <- errors.New("reader saw a partial or mixed file")
				return
			}
		}
	}()
	go func() { // resolve ..data once, read both files from that dir
		defer wg.Done()
		for !stop.Load() {
			ts, err := os.Readlink(filepath.Join(dir, DataDirName))
			if err != nil {
				errc <- err
				return
			}
			c, err1 := os.ReadFile(filepath.Join(dir, ts, "tls.crt"))
			k, err2 := os.ReadFile(filepath.Join(dir, ts, "tls.key"))
			if errors.Is(err1, fs.ErrNotExist) || errors.Is(err2, fs.ErrNotExist) {
				continue // the dir was removed by a later write (step 12): retry
			}
			if err1 != nil || err2 != nil || !bytes.Equal(c, k) {
				errc <- errors.New("pair read from one ts dir is inconsistent")
				return
			}
		}
	}()
	for i := 1; i < 100; i++ {
		w.MustWrite(version(i))
	}
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func TestWriteFileNonAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tls.crt")
	if err := WriteFileNonAtomic(p, []byte("hello world")); err != nil {
		t.Fatal(err)
	}
	ino1, _ := os.Stat(p)
	if err := WriteFileNonAtomic(p, []byte("short")); err != nil {
		t.Fatal(err)
	}
	ino2, _ := os.Stat(p)
	if got := readFile(t, p); got != "short" || !os.SameFile(ino1, ino2) {
		t.Fatalf("content %q, same inode %v", got, os.SameFile(ino1, ino2))
	}
	if err := WriteFileNonAtomic(filepath.Join(dir, "missing", "f"), nil); err == nil || !strings.HasPrefix(err.Error(), "hotcerttest: write non-atomic: ") {
		t.Fatalf("missing dir: %v", err)
	}
	// Through a kubelet symlink it rewrites the file inside the ts dir.
	vol := filepath.Join(dir, "vol")
	w := MustNewAtomicWriter(vol)
	w.MustWrite(map[string][]byte{"ca.crt": []byte("old")})
	if err := WriteFileNonAtomic(filepath.Join(vol, "ca.crt"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(vol, DataDirName, "ca.crt")) != "new" {
		t.Fatalf("symlink target not rewritten")
	}
}
