package file_test

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/source/file"
)

// TestSubPathMountsAreFound reads mount tables as the kernel writes them in a
// container (containerd, kubelet volumes): files a subPath mount put in place
// (a Secret key's file, one whose source the kubelet has deleted since, which
// the kernel marks "//deleted", a ConfigMap volume's subdirectory behind an
// escaped space) are reported and logged once each; files of whole volumes
// are not.
func TestSubPathMountsAreFound(t *testing.T) {
	files := []file.Option{file.WithKeyPair("/etc/tls/tls.crt", "/etc/tls/tls.key"), file.WithCA("/etc/trust bundle/ca.crt")}
	for _, tc := range []struct {
		mountinfo string
		want      []string
	}{
		{"testdata/mountinfo/subpath", []string{"/etc/tls/tls.crt", "/etc/tls/tls.key", "/etc/trust bundle/ca.crt"}},
		{"testdata/mountinfo/whole-volumes", nil},
		// Unreadable tables find nothing, and fail nothing.
		{"testdata/mountinfo/malformed", nil},
		{"testdata/mountinfo/missing", nil},
	} {
		t.Run(tc.mountinfo, func(t *testing.T) {
			var logs bytes.Buffer
			src, err := file.New(append(files, file.WithMountInfo(tc.mountinfo), file.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))...)
			if err != nil {
				t.Fatal(err)
			}
			if got := src.NeverUpdated(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("NeverUpdated() = %q, want %q", got, tc.want)
			}
			warned := strings.Count(logs.String(), "will never be updated")
			if warned != len(tc.want) {
				t.Fatalf("%d warnings for %d subPath files:\n%s", warned, len(tc.want), logs.String())
			}
			for _, f := range tc.want {
				if !strings.Contains(logs.String(), "file=\""+f+"\"") && !strings.Contains(logs.String(), "file="+f+" ") {
					t.Errorf("no warning names %s:\n%s", f, logs.String())
				}
			}
		})
	}
}

// TestSetReportsSubPathMounts: the mechanism under Source (and JWT key
// directories) says it too.
func TestSetReportsSubPathMounts(t *testing.T) {
	set, err := file.NewSet([]file.File{{Path: "/etc/tls/tls.key"}, {Path: "/etc/other/key.pem"}}, file.WithMountInfo("testdata/mountinfo/subpath"))
	if err != nil {
		t.Fatal(err)
	}
	if got := set.NeverUpdated(); !reflect.DeepEqual(got, []string{"/etc/tls/tls.key"}) {
		t.Fatalf("NeverUpdated() = %q", got)
	}
}

// TestSourceLogsThroughItsReloader: a source given no logger says its subPath
// mounts (and later its watch problems) through the logger a Reloader hands it,
// once however often it is handed one; a source given its own keeps it.
func TestSourceLogsThroughItsReloader(t *testing.T) {
	opts := []file.Option{file.WithKeyPair("/etc/tls/tls.crt", "/etc/tls/tls.key"), file.WithMountInfo("testdata/mountinfo/subpath")}
	src, err := file.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	var handed bytes.Buffer
	var sl hotcert.SourceLogger = src
	sl.SetDefaultLogger(slog.New(slog.NewTextHandler(&handed, nil)))
	sl.SetDefaultLogger(slog.New(slog.NewTextHandler(&handed, nil)))
	if n := strings.Count(handed.String(), "will never be updated"); n != 2 {
		t.Fatalf("%d subPath lines through the handed logger, want 2 (one per file, once):\n%s", n, handed.String())
	}

	var own, handedToo bytes.Buffer
	src, err = file.New(append(opts, file.WithLogger(slog.New(slog.NewTextHandler(&own, nil))))...)
	if err != nil {
		t.Fatal(err)
	}
	src.SetDefaultLogger(slog.New(slog.NewTextHandler(&handedToo, nil)))
	if n := strings.Count(own.String(), "will never be updated"); n != 2 || handedToo.Len() != 0 {
		t.Fatalf("own logger: %d lines (want 2), handed logger: %q (want none)", n, handedToo.String())
	}
}
