package daemon

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

// checkUser refuses a user name that cannot be a commit's author: it
// becomes the author of the commit a release or a policy change makes,
// and a newline or an angle bracket in it would write headers of the
// caller's choosing.
func checkUser(user string) error {
	if err := gitrepo.CheckUser(user); err != nil {
		return fluxerr.New(fluxerr.User, fmt.Errorf("the user %q cannot be a commit's author: it holds a control character (such as a newline) or an angle bracket", user),
			"The user names who acted, in commits and history. Give a plain name such as 'alice' or 'Alice Smith'. Nothing was changed.")
	}
	return nil
}

// checkUsers applies checkUser to every string field named "user" of a
// request, at any depth, so that an RPC added later is covered without
// being listed.
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
