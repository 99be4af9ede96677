package history_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/history"
)

// teamA sees namespace a's services and objects.
var teamA = &history.View{
	Service: func(id string) bool { return strings.HasPrefix(id, "a:") },
	Object:  func(o history.SyncObject) bool { return o.Namespace == "a" },
}

func bothTeamsSync() history.Event {
	d := &history.SyncDetail{Problems: []string{"b/bad.yaml:1: not YAML"}}
	for _, o := range []history.SyncObject{
		{Namespace: "a", Kind: "Deployment", Name: "web", File: "a/web.yaml", Line: 1, Action: history.SyncChanged},
		{Namespace: "a", Kind: "Secret", Name: "gone", Action: history.SyncDeleted},
		{Namespace: "a", Kind: "ConfigMap", Name: "cm", File: "a/web.yaml", Line: 20, Action: history.SyncFailed, Error: "denied: reason-a"},
		{Namespace: "b", Kind: "Secret", Name: "btoken", File: "b/s.yaml", Line: 1, Action: history.SyncCreated},
		{Namespace: "b", Kind: "ConfigMap", Name: "bcm", File: "b/s.yaml", Line: 9, Action: history.SyncFailed, Error: "denied: reason-b"},
		{Kind: "ClusterRoleBinding", Name: "bcrb", File: "b/crb.yaml", Action: history.SyncCreated},
	} {
		d.Add(o)
	}
	msg, errs := d.Render("0123456789abcdef", d.Objects, true)
	return history.Event{Type: history.Sync, Commit: "0123456789abcdef", Services: []string{"a:deployment/web"}, Message: msg, Error: errs, Sync: d}
}

// The stored text is the whole sync's; the view of a reader who sees
// namespace a is rendered from its objects alone: counts, objects and
// failures of its own, nothing of namespace b's or cluster-scoped ones,
// and no count of what it does not see.
func TestSyncEventForAView(t *testing.T) {
	ev := bothTeamsSync()
	for _, want := range []string{"created Secret/b/btoken", "created ClusterRoleBinding/bcrb", "2 failed"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("the whole sync's message lacks %q: %q", want, ev.Message)
		}
	}
	if !strings.HasPrefix(ev.Error, "b/bad.yaml:1: not YAML\n") || !strings.Contains(ev.Error, "b/s.yaml:9: ConfigMap/b/bcm: denied: reason-b") {
		t.Errorf("the whole sync's error: %q", ev.Error)
	}
	if got, ok := ev.For(nil); !ok || got.Message != ev.Message || got.Error != ev.Error {
		t.Errorf("a reader who sees everything reads %q / %q, %v", got.Message, got.Error, ok)
	}
	got, ok := ev.For(teamA)
	if !ok {
		t.Fatal("team a is shown nothing of a sync that changed its objects")
	}
	wantMsg := "Sync of 0123456789ab: 0 created, 1 changed, 1 deleted; 1 failed\nconfigured Deployment/a/web\ndeleted Secret/a/gone"
	if got.Message != wantMsg || got.Error != "a/web.yaml:20: ConfigMap/a/cm: denied: reason-a" {
		t.Errorf("team a reads\n%q\n%q\nwant\n%q\nand its own failure", got.Message, got.Error, wantMsg)
	}
	if fmt.Sprint(got.Services) != "[a:deployment/web]" || len(got.Sync.Objects) != 3 {
		t.Errorf("team a's view: services %v, %d objects", got.Services, len(got.Sync.Objects))
	}
	teamB := &history.View{Service: func(id string) bool { return strings.HasPrefix(id, "b:") }, Object: func(o history.SyncObject) bool { return o.Namespace == "b" }}
	got, ok = ev.For(teamB)
	if !ok || strings.Contains(got.Message+got.Error, "a/") || strings.Contains(got.Message+got.Error, "bcrb") || strings.Contains(got.Message+got.Error, "not YAML") || len(got.Services) != 0 {
		t.Errorf("team b reads %q / %q (services %v), %v; want its Secret and failure only", got.Message, got.Error, got.Services, ok)
	}
	nobody := &history.View{Service: func(string) bool { return false }, Object: func(history.SyncObject) bool { return true }}
	ev.Sync.Objects = ev.Sync.Objects[5:] // the cluster-scoped one alone
	if _, ok := ev.For(nobody); ok {
		t.Error("a cluster-scoped object is shown to a reader that does not see everything")
	}
}

// A sync of more objects than the history keeps says so to a view, but
// without counting the objects it does not see.
func TestSyncEventForAViewPastTheLimit(t *testing.T) {
	d := &history.SyncDetail{}
	for i := 0; i < history.MaxSyncObjects+7; i++ {
		ns := "b"
		if i == 0 {
			ns = "a"
		}
		d.Add(history.SyncObject{Namespace: ns, Kind: "ConfigMap", Name: fmt.Sprint("cm", i), Action: history.SyncCreated})
	}
	msg, _ := d.Render("rev", d.Objects, true)
	if !strings.Contains(msg, fmt.Sprintf("%d created", history.MaxSyncObjects+7)) || !strings.HasSuffix(msg, fmt.Sprintf("and %d more", history.MaxSyncObjects+7-200)) {
		t.Errorf("the whole sync's message does not count every object: ...%s", msg[len(msg)-80:])
	}
	got, ok := history.Event{Type: history.Sync, Commit: "rev", Sync: d}.For(teamA)
	if !ok || !strings.HasPrefix(got.Message, "Sync of rev: 1 created, 0 changed, 0 deleted\ncreated ConfigMap/a/cm0\n(the sync changed more than") {
		t.Errorf("team a reads %q", got.Message)
	}
}

// Every other event type: the services and image changes a view sees;
// an error that may name the others is not shown; an event with none of
// its services is not shown; a sync recorded without its objects shows
// its services in the view, and no text.
func TestEveryEventTypeForAView(t *testing.T) {
	for _, typ := range history.Types {
		ev := history.Event{Type: typ, Services: []string{"a:deployment/web", "b:deployment/bapi"}, Message: "automated release of a:deployment/web app=reg/a:2; b:deployment/bapi app=reg/b:2", Error: "b:deployment/bapi failed",
			Changes: []history.Change{{Service: "a:deployment/web", To: "reg/a:2"}, {Service: "b:deployment/bapi", To: "reg/b:2"}}}
		got, ok := ev.For(teamA)
		text := fmt.Sprint(got)
		if !ok || strings.Contains(text, "b:") || strings.Contains(text, "reg/b") || fmt.Sprint(got.Services) != "[a:deployment/web]" {
			t.Errorf("%s: team a reads %+v, %v", typ, got, ok)
		}
		theirs := ev
		theirs.Services, theirs.Changes = []string{"b:deployment/bapi"}, nil
		if got, ok := theirs.For(teamA); ok {
			t.Errorf("%s of team b's service alone is shown to team a: %+v", typ, got)
		}
	}
}
