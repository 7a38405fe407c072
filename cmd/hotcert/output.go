package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// outputFormat validates an -o/--output value.
func outputFormat(o string) (json bool, err error) {
	switch o {
	case "text", "":
		return false, nil
	case "json":
		return true, nil
	}
	return false, fmt.Errorf("-o %q: want text or json", o)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// reportedError is a failure whose JSON report is already on standard output.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// reported marks err (when non-nil) as already described by the JSON just written.
func reported(err error) error {
	if err == nil {
		return nil
	}
	return &reportedError{err}
}

// failureJSON is what a command run with -o json prints when it fails before it
// has a report of its own to print (a bad flag value, an unreachable address).
type failureJSON struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// jsonFailures makes every command below root that takes -o print its failures as
// JSON on standard output too when run with -o json (the one-line reason still goes
// to standard error, and the exit status is non-zero).
func jsonFailures(root *cobra.Command, stdout io.Writer) {
	for _, c := range root.Commands() {
		jsonFailures(c, stdout)
	}
	out := root.Flags().Lookup("output")
	if out == nil || root.RunE == nil {
		return
	}
	run := root.RunE
	root.RunE = func(cmd *cobra.Command, args []string) error {
		err := run(cmd, args)
		var done *reportedError
		if err == nil || errors.As(err, &done) || out.Value.String() != "json" {
			return err
		}
		if werr := writeJSON(stdout, failureJSON{Error: err.Error()}); werr != nil {
			return errors.Join(err, werr)
		}
		return reported(err)
	}
}
