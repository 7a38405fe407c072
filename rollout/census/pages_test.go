package census_test

import (
	"bufio"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// residentCode is how many bytes of its executable's pages process pid has
// resident, by what they hold: the package of the function at each page's
// start for code, "read-only data" for the rest (type descriptors, the
// function tables that stack walks read). The kernel maps a file's pages
// that are cached around each one a process touches (its fault-around, 64
// KiB), so a package's count is a package's and its neighbours' in the
// binary. It reads /proc/PID/pagemap (a page's present bit, which a process
// may read of its own user's processes) and the executable's symbol table.
func residentCode(pid int) (map[string]int, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, err
	}
	f, err := elf.Open(exe)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, err
	}
	syms = slices.DeleteFunc(syms, func(s elf.Symbol) bool { return elf.ST_TYPE(s.Info) != elf.STT_FUNC })
	slices.SortFunc(syms, func(a, b elf.Symbol) int { return cmp.Compare(a.Value, b.Value) })
	pagemap, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pagemap.Close()
	mappings, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer mappings.Close()
	page := uint64(os.Getpagesize())
	out := map[string]int{}
	sc := bufio.NewScanner(mappings)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != exe {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: %q", mappings.Name(), sc.Text())
		}
		for a := start; a < end; a += page {
			var entry [8]byte
			if _, err := pagemap.ReadAt(entry[:], int64(a/page*8)); err != nil { //nolint:gosec // a user-space address, far below 2^63
				return nil, err
			}
			if binary.LittleEndian.Uint64(entry[:])>>63 == 0 {
				continue
			}
			what := "read-only data"
			if strings.Contains(f[1], "x") {
				what = "code" // of a binary without its symbol table
				// The last function that starts at or before the page.
				i, found := slices.BinarySearchFunc(syms, a, func(s elf.Symbol, a uint64) int { return cmp.Compare(s.Value, a) })
				if !found {
					i--
				}
				if i >= 0 {
					what = "code of " + packageOf(syms[i].Name)
				}
			}
			out[what] += int(page) //nolint:gosec // a page size
		}
	}
	return out, sc.Err()
}

// packageOf is the package path of a Go function's symbol name.
func packageOf(sym string) string {
	slash := strings.LastIndex(sym, "/")
	if dot := strings.Index(sym[slash+1:], "."); dot >= 0 {
		return sym[:slash+1+dot]
	}
	return sym
}

// codePages is residentCode of the process when HOTCERT_BENCH_PAGES is set
// (nil otherwise).
func (p *controllerProc) codePages(b *testing.B) map[string]int {
	b.Helper()
	if os.Getenv("HOTCERT_BENCH_PAGES") == "" {
		return nil
	}
	pages, err := residentCode(p.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return pages
}

// logCodePages logs where the resident pages of the census's executable
// (with) exceed those of the process without the census by 64 KiB or more,
// largest first.
func logCodePages(b *testing.B, without, with map[string]int) {
	b.Helper()
	if with == nil {
		return
	}
	keys := slices.Collect(maps.Keys(with))
	more := func(k string) int { return with[k] - without[k] }
	slices.SortFunc(keys, func(x, y string) int { return more(y) - more(x) })
	sum := func(m map[string]int) (n int) {
		for _, v := range m {
			n += v
		}
		return n
	}
	total := sum(with) - sum(without)
	var parts []string
	for _, k := range keys {
		if d := more(k); d >= 64<<10 {
			parts = append(parts, fmt.Sprintf("%s %+d KiB", k, d>>10))
		}
	}
	b.Logf("the census's executable: %+d KiB more of its pages resident; %s", total>>10, strings.Join(parts, ", "))
}
