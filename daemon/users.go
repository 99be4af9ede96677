package daemon

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

// checkUser refuses a user name that cannot be a commit's author: it
// becomes the author of the commit a release or a policy change makes,
// and a newline or a stray angle bracket in it would write headers of the
// caller's choosing. git's own "Name <email>" form is accepted.
func checkUser(user string) error {
	if err := gitrepo.CheckUser(user); err != nil {
		return fluxerr.New(fluxerr.User, fmt.Errorf("the user %q cannot be a commit's author: %w", user, err),
			"The user names who acted, in commits and history. Give a plain name such as 'alice' or 'Alice Smith', or git's own form 'Jane Doe <jane@example.com>'. Nothing was changed.")
	}
	return nil
}

// checkMessage refuses a release or lock message that holds a control
// character other than a newline or a tab, or that is not UTF-8: it goes
// into a commit message and the history, and a stray byte there (an
// escape sequence, a NUL) garbles a terminal or is refused by a database.
func checkMessage(field, msg string) error {
	if !utf8.ValidString(msg) {
		return fluxerr.New(fluxerr.User, fmt.Errorf("the %s is not valid UTF-8 text", field),
			"Give the message as plain UTF-8 text (was it read from a binary file or typed in another encoding?). Nothing was changed.")
	}
	for _, r := range msg {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return fluxerr.New(fluxerr.User, fmt.Errorf("the %s holds the control character %U", field, r),
				"A message may hold newlines and tabs but no other control characters (such as a NUL, a carriage return or a terminal escape). Nothing was changed.")
		}
	}
	return nil
}

// checkUsers applies checkUser to every string field named "user" of a
// request, and checkMessage to every one named "message" or
// "lock_message", at any depth, so that an RPC added later is covered
// without being listed.
func checkUsers(req any) error {
	m, ok := req.(proto.Message)
	if !ok || m == nil {
		return nil
	}
	return walkUsers(m.ProtoReflect())
}

func walkUsers(m protoreflect.Message) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Name() == "user" && fd.Kind() == protoreflect.StringKind && !fd.IsList() && !fd.IsMap():
			err = checkUser(v.String())
		case (fd.Name() == "message" || fd.Name() == "lock_message") && fd.Kind() == protoreflect.StringKind && !fd.IsList() && !fd.IsMap():
			err = checkMessage(strings.ReplaceAll(string(fd.Name()), "_", " "), v.String())
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			for i := 0; i < v.List().Len() && err == nil; i++ {
				err = walkUsers(v.List().Get(i).Message())
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
			err = walkUsers(v.Message())
		}
		return err == nil
	})
	return err
}
