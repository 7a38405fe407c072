package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// sumsFile is the name of the release's checksums.
const sumsFile = "SHA256SUMS"

// writeSums writes SHA256SUMS into dir: one line per other file of dir,
// sorted by name, in the format `sha256sum -c SHA256SUMS` verifies
// (hexadecimal digest, two spaces — text mode, which is binary mode on
// every platform sha256sum runs on today — and the name).
func writeSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries { // ReadDir sorts by name
		if e.Name() == sumsFile {
			continue
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("checksums: %s is not a regular file", e.Name())
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(dir, sumsFile), []byte(b.String()), 0o644)
}

// fileSHA256 is the hexadecimal SHA-256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
