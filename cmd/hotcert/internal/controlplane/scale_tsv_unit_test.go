package controlplane_test

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUpsertTSVKeepsOtherRowsAndCells(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "x.tsv")
	header := []string{"agents", "a", "b"}
	steps := []struct {
		key   string
		cells map[string]string
	}{
		{"5000", map[string]string{"a": "5", "b": "50"}},
		{"1000", map[string]string{"a": "1", "b": "10"}},
		{"5000", map[string]string{"b": "51"}}, // a is kept
		{"10000", map[string]string{"a": "10"}},
	}
	for _, s := range steps {
		if err := upsertTSV(path, header, s.key, s.cells); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "agents\ta\tb\n1000\t1\t10\n5000\t5\t51\n10000\t10\t\n"
	if string(got) != want {
		t.Fatalf("file:\n%s\nwant:\n%s", got, want)
	}
	if err := upsertTSV(path, []string{"agents", "c"}, "1000", nil); err == nil {
		t.Fatal("a file with another header was rewritten")
	}
	if err := upsertTSV(path, header, "1000", map[string]string{"zz": "1"}); err == nil {
		t.Fatal("a cell outside the header was accepted")
	}
	if after, _ := os.ReadFile(path); string(after) != want {
		t.Fatalf("a refused update changed the file:\n%s", after)
	}
}
