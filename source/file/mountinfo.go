package file

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// defaultMountInfo is where Linux lists the mounts of the calling process
// (proc(5), /proc/[pid]/mountinfo).
const defaultMountInfo = "/proc/self/mountinfo"

// A mount is one line of a mountinfo file: the directory (or file) of its
// filesystem that is mounted (root), and where (point).
type mount struct {
	root, point, fsType string
}

// readMountInfo parses a mountinfo file. It is parsed here, with the standard
// library, because the parsers that exist (k8s.io/mount-utils,
// github.com/moby/sys/mountinfo) would add modules to the graph of every
// importer of the TLS library for ten lines of splitting; the format is the
// kernel's (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	(1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
//
// where the optional fields (7) end with a lone "-", and paths escape space,
// tab, newline and backslash as octal (\040, \011, \012, \134).
func readMountInfo(path string) ([]mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMountInfo(f)
}

func parseMountInfo(r io.Reader) ([]mount, error) {
	var out []mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if !ok || len(f) < 6 {
			return nil, fmt.Errorf("file: mountinfo line %d: not a mount: %q", n, line)
		}
		m := mount{root: unescapeMountPath(f[3]), point: unescapeMountPath(f[4])}
		if pf := strings.Fields(post); len(pf) > 0 {
			m.fsType = pf[0]
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("file: reading mountinfo: %w", err)
	}
	return out, nil
}

// unescapeMountPath undoes the kernel's octal escapes (\040 and the like).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// A subPathMount is a watched file that a Kubernetes subPath mount put in
// place: the kubelet bind-mounted it (or a directory above it) once, when the
// container started, so a Secret or ConfigMap update never reaches it.
type subPathMount struct {
	file  string
	mount mount
}

// kubeletVolumeDirs are the directories of the kubelet's Secret, ConfigMap and
// projected volumes on the node (…/pods/<uid>/volumes/kubernetes.io~secret/<name>).
var kubeletVolumeDirs = []string{"/volumes/kubernetes.io~secret/", "/volumes/kubernetes.io~configmap/", "/volumes/kubernetes.io~projected/"}

// subPathMounts returns the files, among paths, that mounts says are subPath
// mounts: the mount that holds the file is the file itself, or its root lies
// inside a kubelet volume rather than being the volume's directory (on the
// node's disk, …/kubernetes.io~configmap/<name>/..2026_…/ca.crt; in a Secret
// volume's tmpfs, /..2026_…/tls.crt, below the kubelet's timestamped
// directory). A whole volume is mounted from its directory and is updated.
func subPathMounts(paths []string, mounts []mount) []subPathMount {
	var out []subPathMount
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		m, ok := holding(abs, mounts)
		if ok && (m.point == abs || insideKubeletVolume(m)) {
			out = append(out, subPathMount{file: p, mount: m})
		}
	}
	return out
}

// holding returns the mount that path is on: the one with the longest mount
// point above it, the last listed of equal ones (it is mounted over the
// others).
func holding(path string, mounts []mount) (mount, bool) {
	var best mount
	found := false
	for _, m := range mounts {
		under := m.point == path || m.point == "/" || strings.HasPrefix(path, strings.TrimSuffix(m.point, "/")+"/")
		if under && (!found || len(m.point) >= len(best.point)) {
			best, found = m, true
		}
	}
	return best, found
}

func insideKubeletVolume(m mount) bool {
	for _, d := range kubeletVolumeDirs {
		if _, rest, ok := strings.Cut(m.root, d); ok {
			_, below, _ := strings.Cut(rest, "/")
			return strings.Trim(below, "/") != ""
		}
	}
	// A tmpfs (Secret, projected) mounted from below the kubelet's
	// timestamped directory of an atomic update.
	first, _, _ := strings.Cut(strings.TrimPrefix(m.root, "/"), "/")
	return m.fsType == "tmpfs" && strings.HasPrefix(first, "..") && first != ".."
}
