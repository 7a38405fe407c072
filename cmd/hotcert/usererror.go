package main

import (
	"errors"
	"fmt"
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

// inUserTerms rewrites a startup error about bad material in the user's terms: the
// flag, the file it named and what is wrong with it ("--cert-file /tls/tls.crt:
// certificate chain holds no PEM block"), without the layers of the library it
// passed through ("controlplane: server certificate: hotcert: initial load …").
// Other errors are returned as they are.
func inUserTerms(err error, ff flagFiles) error {
	var he *hotcert.Error
	if !errors.As(err, &he) {
		return err
	}
	what := he.Detail
	if he.Err != nil {
		what += ": " + he.Err.Error()
	}
	if flag, ok := ff.files[he.Input]; ok && he.Input != "" {
		return &materialError{msg: fmt.Sprintf("%s %s: %s", flag, he.Input, what), err: err}
	}
	for dir, flag := range ff.dirs {
		if dir == "" {
			continue
		}
		if rel, rerr := filepath.Rel(dir, he.Input); rerr == nil && !strings.HasPrefix(rel, "..") { // a file of dir
			return &materialError{msg: fmt.Sprintf("%s: %s: %s", flag, he.Input, what), err: err}
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
