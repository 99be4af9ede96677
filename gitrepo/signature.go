package gitrepo

import (
	"errors"
	"fmt"
	"net/mail"
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

// CheckUser is ParseUser without its result: whether a user as callers
// give it can author a commit.
func CheckUser(user string) error {
	_, err := ParseUser(user)
	return err
}

// ParseUser reads a user as callers give it: a plain name ("alice"), or
// git's own author form, "Jane Doe <jane@example.com>", which Flux v1's
// fluxctl sent by default. The form's address must be one address
// (net/mail), with no angle bracket or control character left in either
// part. Anything else that holds an angle bracket is refused.
func ParseUser(user string) (Signature, error) {
	if open := strings.IndexByte(user, '<'); open >= 0 && strings.HasSuffix(user, ">") {
		name := strings.TrimRight(user[:open], " ")
		email := user[open+1 : len(user)-1]
		addr, err := mail.ParseAddress("<" + email + ">")
		if err != nil || addr.Address != email || email == "" {
			return Signature{}, fmt.Errorf("the user %q is %w: %q is not one email address", user, ErrBadSignature, email)
		}
		s := Signature{Name: name, Email: email}
		if name == "" {
			s.Name = email
		}
		return s, s.Validate()
	}
	s := Signature{Name: user}
	return s, s.Validate()
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
