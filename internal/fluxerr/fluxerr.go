package fluxerr

import (
	"errors"
	"strings"
)

// Kind classifies an error by who can act on it.
type Kind int

const (
	// Server is a failure inside fluxd or a system it depends on.
	Server Kind = iota
	// User is a request that cannot work as asked.
	User
	// Missing is a request for something that does not exist.
	Missing
	// Precondition is a request made against a state that has changed.
	Precondition
	// Unimplemented is a declared feature that is not built yet.
	Unimplemented
	// Unavailable is a dependency that cannot be reached just now.
	Unavailable
	// Forbidden is a request the caller may not make, whatever its
	// arguments.
	Forbidden
)

// Error is an error with a kind and a help text for a person.
type Error struct {
	Kind Kind
	// Err is what happened.
	Err error
	// Help says the likely causes and what to try; it may span lines.
	Help string
}

func (e *Error) Error() string {
	if e.Help == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + "\n\n" + strings.TrimSpace(e.Help)
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error of kind k.
func New(k Kind, err error, help string) *Error { return &Error{Kind: k, Err: err, Help: help} }

// KindOf returns the kind of the first *Error in err's chain, or Server.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Server
}

// NotImplemented is the error of a declared feature that is not built yet.
func NotImplemented(what, issue string) *Error {
	return &Error{
		Kind: Unimplemented,
		Err:  errors.New(what + " is not implemented in this version of fluxd"),
		Help: "It is planned (" + issue + "); docs/README.md says what works today.",
	}
}

// FirstLine is an error's first line: its message without the help that
// follows (the causes and what to try), for a log line, a notice or a
// history message that has room for one line.
func FirstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
