package gitrepo

import (
	"fmt"
	"time"
)

// CommitInfo is one commit, as an error message names it: who made it,
// what it says and which files it changed.
type CommitInfo struct {
	Hash, Author, Email, Subject string
	When                         time.Time
	Files                        []string
}

func (c CommitInfo) String() string {
	return fmt.Sprintf("commit %.12s by %s <%s>: %q", c.Hash, c.Author, c.Email, c.Subject)
}
