package history

import (
	"strings"
	"unicode/utf8"
)

// CleanText returns s as every store keeps it: valid UTF-8 without NUL
// bytes, each invalid byte and each NUL replaced by U+FFFD. PostgreSQL
// refuses both in text columns, and SQLite would keep them; an adapter
// cleans what it stores so that an event is kept, and reads back the
// same, on either (a release must not go unrecorded because its message
// or an error text held a stray byte).
func CleanText(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// Clean returns ev with its text fields cleaned (see CleanText).
func (ev Event) Clean() Event {
	ev.Instance, ev.User, ev.Message = CleanText(ev.Instance), CleanText(ev.User), CleanText(ev.Message)
	ev.Commit, ev.Error = CleanText(ev.Commit), CleanText(ev.Error)
	if ev.Services != nil {
		svcs := make([]string, len(ev.Services))
		for i, s := range ev.Services {
			svcs[i] = CleanText(s)
		}
		ev.Services = svcs
	}
	if ev.Changes != nil {
		changes := make([]Change, len(ev.Changes))
		for i, c := range ev.Changes {
			changes[i] = Change{Service: CleanText(c.Service), Container: CleanText(c.Container), From: CleanText(c.From), To: CleanText(c.To)}
			if v := c.Verification; v != nil {
				// The detail quotes what a registry and its signatures say.
				changes[i].Verification = &Verification{Outcome: CleanText(v.Outcome), Digest: CleanText(v.Digest), Detail: CleanText(v.Detail)}
				for _, p := range v.Profiles {
					changes[i].Verification.Profiles = append(changes[i].Verification.Profiles, CleanText(p))
				}
			}
		}
		ev.Changes = changes
	}
	if ev.Sync != nil {
		d := &SyncDetail{Omitted: ev.Sync.Omitted}
		for _, o := range ev.Sync.Objects {
			o.Namespace, o.Kind, o.Name = CleanText(o.Namespace), CleanText(o.Kind), CleanText(o.Name)
			o.File, o.Action, o.Error = CleanText(o.File), CleanText(o.Action), CleanText(o.Error)
			d.Objects = append(d.Objects, o)
		}
		for _, p := range ev.Sync.Problems {
			d.Problems = append(d.Problems, CleanText(p))
		}
		ev.Sync = d
	}
	return ev
}

// Clean returns j with its text fields cleaned (see CleanText). Spec and
// Plan are JSON, which encodes any such byte as an escape.
func (j Job) Clean() Job {
	j.ID, j.Instance, j.Stage = CleanText(j.ID), CleanText(j.Instance), CleanText(j.Stage)
	j.Commit, j.Error, j.Checksum = CleanText(j.Commit), CleanText(j.Error), CleanText(j.Checksum)
	return j
}
