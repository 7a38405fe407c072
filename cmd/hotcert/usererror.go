package main

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/hotcert/hotcert"
)

// flagFiles maps the files (and directories) the command line named to the flags
// that named them.
type flagFiles struct {
	files map[string]string // path → flag
	dirs  map[string]string // directory → flag
}

// fileFlags returns the flagFiles of flag/path pairs ("--cert-file", path, ...). A
// path named by two flags maps to both ("--cert-file/--key-file").
func fileFlags(pairs ...string) flagFiles {
	ff := flagFiles{files: map[string]string{}}
	for i := 0; i+1 < len(pairs); i += 2 {
		flag, path := pairs[i], pairs[i+1]
		if path == "" {
			continue
		}
		if prev, ok := ff.files[path]; ok {
			flag = prev + "/" + flag
		}
		ff.files[path] = flag
	}
	return ff
}

// inUserTerms says a startup error about bad material as the library says it — the
// file and what is wrong with it ("/tls/tls.crt: certificate chain holds no
// certificate"; hotcert.Error's text, which is in the user's terms already) —
// after the flag that named the file ("--cert-file /tls/tls.crt: …"), without the
// layers of the apps it passed through ("controlplane: server certificate: hotcert:
// …"). Other errors are returned as they are.
func inUserTerms(err error, ff flagFiles) error {
	var he *hotcert.Error
	if !errors.As(err, &he) {
		return err
	}
	if flag, ok := ff.files[he.Input]; ok && he.Input != "" {
		return &materialError{msg: flag + " " + he.Error(), err: err}
	}
	for dir, flag := range ff.dirs {
		if dir == "" {
			continue
		}
		if rel, rerr := filepath.Rel(dir, he.Input); rerr == nil && !strings.HasPrefix(rel, "..") { // a file of dir
			return &materialError{msg: flag + ": " + he.Error(), err: err}
		}
	}
	return &materialError{msg: he.Error(), err: err}
}

// materialError is a startup error about bad material, in the user's terms; it
// unwraps to the library's error (so hotcert.ReasonOf still works).
type materialError struct {
	msg string
	err error
}

func (e *materialError) Error() string { return e.msg }
func (e *materialError) Unwrap() error { return e.err }
