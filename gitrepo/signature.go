package gitrepo

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// ErrBadSignature is wrapped by errors about a name or email that cannot
// be written into a commit as they are.
var ErrBadSignature = errors.New("not usable as a git author or committer")

// Validate refuses a name or email that would change a commit's headers:
// git writes "author NAME <EMAIL> TIME" on one line and go-git escapes
// nothing, so a newline starts a header of the caller's choosing and an
// angle bracket ends the name or the email early.
func (s Signature) Validate() error {
	for _, f := range []struct{ what, v string }{{"name", s.Name}, {"email", s.Email}} {
		if err := checkIdent(f.v); err != nil {
			return fmt.Errorf("the %s %q is %w: %v", f.what, f.v, ErrBadSignature, err)
		}
	}
	return nil
}

// CheckUser is Validate for a user name alone, as callers give it.
func CheckUser(user string) error {
	return Signature{Name: user}.Validate()
}

func checkIdent(v string) error {
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return fmt.Errorf("it holds a control character (%U)", []rune(v[i:])[0])
	}
	if strings.ContainsAny(v, "<>") {
		return errors.New("it holds an angle bracket")
	}
	return nil
}
