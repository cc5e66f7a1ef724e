package configs

import (
	"fmt"
	"strconv"
	"strings"
)

// FieldError is one problem in a configuration. Parse and Validate return
// every problem they find, joined with errors.Join; use errors.As (or the
// Unwrap() []error of the joined error) to look at them one by one.
//
// Error() reads "source:line:col: field.path: message"; parts that are not
// known are left out (a config built in code has no source or line).
type FieldError struct {
	Source string // file name as given to Load/Parse; "" for configs built in code
	Line   int    // 1-based; 0 when unknown
	Column int    // 1-based; 0 when unknown
	Field  string // dotted path such as "listeners[1].listen"; "" for the whole file
	Msg    string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
			if e.Column > 0 {
				b.WriteString(":" + strconv.Itoa(e.Column))
			}
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// maxErrors stops a hopeless file from producing thousands of lines.
const maxErrors = 100

// mark is where a path was found in the file. fp is the decoded value,
// formatted, for leaves: Validate only points at the file when the value
// is still the one read from it (code such as flag handling may have
// replaced it since).
type mark struct {
	line, col int
	fp        string
	leaf      bool
}

type sourceMeta struct {
	source string
	marks  map[string]mark
	// decodeErrs are the decoder's problems, reported by Validate first.
	decodeErrs []error
}

// errorList collects FieldErrors up to maxErrors.
type errorList struct {
	errs    []error
	dropped int
}

func (l *errorList) add(e *FieldError) {
	if len(l.errs) >= maxErrors {
		l.dropped++
		return
	}
	l.errs = append(l.errs, e)
}

func (l *errorList) count() int { return len(l.errs) + l.dropped }

func (l *errorList) list(source string) []error {
	if l.dropped == 0 {
		return l.errs
	}
	return append(l.errs, &FieldError{Source: source, Msg: fmt.Sprintf("%d more errors not shown", l.dropped)})
}

// fingerprint formats a value the same way for the decoder and Validate.
func fingerprint(v any) string {
	switch p := v.(type) {
	case *int:
		if p == nil {
			return "<nil>"
		}
		return strconv.Itoa(*p)
	}
	return fmt.Sprint(v)
}

// parentPath drops the last ".name" or "[i]" of a path.
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}
