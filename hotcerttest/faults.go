package hotcerttest

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// Truncate returns a copy of data cut in the middle of the base64 body of its
// last PEM block, so that block no longer parses while any complete block
// before it still does. Applied to a single certificate or key it yields a
// file that does not parse at all (a half-written file); applied to a bundle
// it yields one that silently loses its last certificate. Data without a PEM
// block is cut in half.
func Truncate(data []byte) []byte {
	cut := len(data) / 2
	if begin := bytes.LastIndex(data, []byte("-----BEGIN ")); begin >= 0 {
		bodyStart := begin
		if nl := bytes.IndexByte(data[begin:], '\n'); nl >= 0 {
			bodyStart = begin + nl + 1
		}
		bodyEnd := len(data)
		if end := bytes.Index(data[bodyStart:], []byte("-----END ")); end >= 0 {
			bodyEnd = bodyStart + end
		}
		cut = bodyStart + (bodyEnd-bodyStart)/2
	}
	return append([]byte(nil), data[:cut]...)
}

// WriteFileNonAtomic writes data to path the way a naive writer does: it
// truncates the file in place (creating it with mode 0644 if needed) and
// writes data in two chunks, so a concurrent reader or watcher can observe an
// empty or half-written file. If path is a symlink, the file it points to is
// rewritten.
func WriteFileNonAtomic(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("hotcerttest: write non-atomic: %w", err)
	}
	half := len(data) / 2
	_, err = f.Write(data[:half])
	if err == nil {
		_, err = f.Write(data[half:])
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("hotcerttest: write non-atomic: %w", err)
	}
	return nil
}

// ContainsKeyMaterial reports whether s (a log, an error message, a metrics page)
// contains a PEM private key header or any 16-character fragment of the base64 body
// of one of the leaves' private keys. Tests use it to prove that nothing leaks keys.
func ContainsKeyMaterial(s string, leaves ...*Leaf) bool {
	if strings.Contains(s, "PRIVATE KEY") {
		return true
	}
	for _, l := range leaves {
		for _, line := range bytes.Split(l.KeyPEM, []byte("\n")) {
			if len(line) >= 16 && !bytes.HasPrefix(line, []byte("-----")) && strings.Contains(s, string(line[:16])) {
				return true
			}
		}
	}
	return false
}
