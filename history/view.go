package history

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A sync applies every team's objects, so its event is about everyone's.
// It keeps what it did object by object (SyncDetail), and every reader's
// view of it is rendered from the objects that reader may see: Event.For
// with the reader's View. The recorded Message and Error are the view of
// a reader who sees everything.
//
// The invariant: whatever shows an event to a reader that does not see
// everything (a scoped caller's history, and so the status page's; a
// notification receiver filtered by services) shows Event.For's result,
// never the stored text.

// SyncObject is one object a sync created, changed, deleted or failed to
// apply.
type SyncObject struct {
	// Namespace is "" for a cluster-scoped object.
	Namespace string `json:"namespace,omitempty"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	// File is the repository file defining the object (for kustomize's
	// output, the directory holding kustomization.yaml); "" for an object
	// pruned from the cluster. Line is where it starts (0: unknown).
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	// Action is what the sync did: created, configured, deleted, failed.
	Action string `json:"action"`
	// Error says why it failed.
	Error string `json:"error,omitempty"`
}

// The actions a SyncObject records (platform.Action*, not imported).
const (
	SyncCreated = "created"
	SyncChanged = "configured"
	SyncDeleted = "deleted"
	SyncFailed  = "failed"
)

// Ref is "Kind/namespace/name", or "Kind/name" for a cluster-scoped
// object (platform.ObjectRef's String).
func (o SyncObject) Ref() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// ID is "namespace:kind/name", the form of a service ID (the kind in
// lower case); "" for a cluster-scoped object.
func (o SyncObject) ID() string {
	if o.Namespace == "" {
		return ""
	}
	return o.Namespace + ":" + strings.ToLower(o.Kind) + "/" + o.Name
}

func (o SyncObject) where() string {
	if o.Line > 0 {
		return fmt.Sprintf("%s:%d", o.File, o.Line)
	}
	return o.File
}

// MaxSyncObjects bounds the objects a sync event keeps: a first sync of
// tens of thousands of objects would otherwise make one huge row. Those
// beyond it are counted in SyncDetail.Omitted.
const MaxSyncObjects = 2000

// maxListed bounds the objects one rendered message names.
const maxListed = 200

// SyncDetail is what a sync did, object by object.
type SyncDetail struct {
	// Objects are those created, changed, deleted or failed, in the
	// sync's order, at most MaxSyncObjects.
	Objects []SyncObject `json:"objects,omitempty"`
	// Omitted counts, by action, the objects past MaxSyncObjects.
	Omitted map[string]int `json:"omitted,omitempty"`
	// Problems are failures tied to no object: the sync failing as a
	// whole, files that could not be read ("file:line: why").
	Problems []string `json:"problems,omitempty"`
}

// Add appends an object, or counts it when the detail is full.
func (d *SyncDetail) Add(o SyncObject) {
	if len(d.Objects) < MaxSyncObjects {
		d.Objects = append(d.Objects, o)
		return
	}
	if d.Omitted == nil {
		d.Omitted = map[string]int{}
	}
	d.Omitted[o.Action]++
}

// Render is the sync event's message and error as a reader sees them who
// sees the objects objs and, when all is set, everything else: the
// problems tied to no object and the objects past MaxSyncObjects.
//
// A reader who does not see everything is told nothing of the rest, not
// even how many: a count of another team's objects says when that team
// deploys and how much, and a problem tied to no object may name any
// team's file. Only the fact that the history kept no more objects (so
// that some of the reader's own may be missing) is said, without a count.
func (d *SyncDetail) Render(commit string, objs []SyncObject, all bool) (message, errText string) {
	count := map[string]int{}
	for _, o := range objs {
		count[o.Action]++
	}
	omitted := 0
	if all {
		for a, n := range d.Omitted {
			count[a] += n
			if a != SyncFailed {
				omitted += n
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Sync of %s: %d created, %d changed, %d deleted", short(commit), count[SyncCreated], count[SyncChanged], count[SyncDeleted])
	// Failures are counted after a semicolon, so that the objects listed
	// under the line never read as if they had failed.
	switch {
	case count[SyncFailed] > 0:
		fmt.Fprintf(&b, "; %d failed", count[SyncFailed])
	case all && len(d.Problems) > 0:
		b.WriteString("; the sync failed")
	}
	listed, more := 0, omitted
	for _, o := range objs {
		if o.Action == SyncFailed {
			continue
		}
		if listed == maxListed {
			more++
			continue
		}
		fmt.Fprintf(&b, "\n%s %s", o.Action, o.Ref())
		listed++
	}
	if more > 0 {
		fmt.Fprintf(&b, "\nand %d more", more)
	}
	if !all && len(d.Omitted) > 0 {
		fmt.Fprintf(&b, "\n(the sync changed more than the %d objects the history keeps: some of yours may not be listed)", MaxSyncObjects)
	}
	var fails []string
	if all {
		fails = append(fails, d.Problems...)
	}
	for _, o := range objs {
		if o.Action != SyncFailed {
			continue
		}
		if w := o.where(); w != "" {
			fails = append(fails, fmt.Sprintf("%s: %s: %s", w, o.Ref(), o.Error))
		} else {
			fails = append(fails, fmt.Sprintf("%s: %s", o.Ref(), o.Error))
		}
	}
	if all && d.Omitted[SyncFailed] > 0 {
		fails = append(fails, fmt.Sprintf("and %d more failed", d.Omitted[SyncFailed]))
	}
	return b.String(), strings.Join(fails, "\n")
}

// A View is what one reader of the history may see: a scoped caller, a
// notification receiver filtered by services. A nil *View sees
// everything.
type View struct {
	// Service says whether the reader sees the service with this ID.
	Service func(id string) bool
	// Object says whether the reader sees an object a sync applied. It
	// is not asked of a cluster-scoped object (Namespace ""): that
	// belongs to no team, and only a reader who sees everything (no
	// View) sees it.
	Object func(SyncObject) bool
}

func (v *View) service(id string) bool { return v.Service != nil && v.Service(id) }

// For is ev as v sees it, and false when v is to be shown nothing of it.
// It keeps the services and image changes v sees. A sync event is
// rendered again from the objects v sees (SyncDetail.Render), its
// services cut to the workloads among them; one with none v sees is not
// shown. A sync event recorded without its objects (by an earlier fluxd)
// shows v its services and no text. Another event naming no service v
// sees is not shown; one of whose services v sees only some has its
// message written again from the services and changes v sees, and not
// its error, which may name the others.
func (ev Event) For(v *View) (Event, bool) {
	if v == nil {
		return ev, true
	}
	var svcs []string
	for _, s := range ev.Services {
		if v.service(s) {
			svcs = append(svcs, s)
		}
	}
	var changes []Change
	for _, c := range ev.Changes {
		if v.service(c.Service) {
			changes = append(changes, c)
		}
	}
	ev.Changes = changes
	if ev.Type != Sync {
		if len(svcs) == 0 {
			return Event{}, false
		}
		if len(svcs) < len(ev.Services) && ev.Error != "" {
			// A failed policy change's error says which first ("lock: "):
			// notifications tell them apart by it.
			what := ""
			if t, _, ok := strings.Cut(ev.Error, ": "); ok && slices.Contains(Types, Type(t)) {
				what = t + ": "
			}
			ev.Error = what + "failed (the error is not shown: it may name services you do not see)"
		}
		if len(svcs) < len(ev.Services) {
			// The message was written for everyone who sees all its
			// services (an automated release lists each service and
			// image): it is written again from what v sees.
			ev.Message = partialMessage(ev.Type, svcs, changes)
		}
		ev.Services = svcs
		return ev, true
	}
	if ev.Sync == nil {
		if len(svcs) == 0 {
			return Event{}, false
		}
		ev.Services = svcs
		ev.Message = fmt.Sprintf("Sync of %s (recorded by an earlier fluxd, which did not keep the sync's objects one by one: only callers who see everything read its objects)", short(ev.Commit))
		if ev.Error != "" {
			ev.Error = "the sync failed (recorded by an earlier fluxd: the failures are not shown)"
		}
		return ev, true
	}
	var objs []SyncObject
	ids := map[string]bool{}
	for _, o := range ev.Sync.Objects {
		if o.Namespace != "" && v.Object != nil && v.Object(o) {
			objs = append(objs, o)
			ids[o.ID()] = true
		}
	}
	if len(objs) == 0 {
		return Event{}, false
	}
	ev.Services = nil
	for _, s := range svcs {
		if ids[s] {
			ev.Services = append(ev.Services, s)
		}
	}
	ev.Message, ev.Error = ev.Sync.Render(ev.Commit, objs, false)
	ev.Sync = &SyncDetail{Objects: objs}
	return ev, true
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// EncodeSync is d as a store keeps it: JSON, "" for nil.
func EncodeSync(d *SyncDetail) (string, error) {
	if d == nil {
		return "", nil
	}
	b, err := json.Marshal(d)
	return string(b), err
}

// DecodeSync reads what EncodeSync wrote.
func DecodeSync(s string) (*SyncDetail, error) {
	if s == "" {
		return nil, nil
	}
	d := &SyncDetail{}
	if err := json.Unmarshal([]byte(s), d); err != nil {
		return nil, fmt.Errorf("the sync's objects: %w", err)
	}
	return d, nil
}

// partialMessage is an event's message for a reader who sees only some
// of its services: its type, then each service seen with its image
// changes, as AutomatedMessage writes them.
func partialMessage(t Type, svcs []string, changes []Change) string {
	parts := make([]string, 0, len(svcs))
	for _, s := range svcs {
		p := s
		for _, c := range changes {
			if c.Service == s {
				p += " " + c.Container + "=" + c.To
			}
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("%s of %s (the rest of the message is not shown: it names services you do not see)", t, strings.Join(parts, "; "))
}
