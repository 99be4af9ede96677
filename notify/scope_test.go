package notify_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
)

// syncEvent is a sync's event as the syncer records it: its objects one
// by one, and the text a reader who sees everything reads.
func syncEvent(rev string, objs []history.SyncObject, problems ...string) history.Event {
	d := &history.SyncDetail{Problems: problems}
	for _, o := range objs {
		d.Add(o)
	}
	msg, errs := d.Render(rev, d.Objects, true)
	var svcs []string
	for _, o := range objs {
		if o.Kind == "Deployment" {
			svcs = append(svcs, o.ID())
		}
	}
	return history.Event{Instance: history.SyncInstance, Type: history.Sync, User: "fluxd", Commit: rev, Services: svcs, Message: msg, Error: errs, Sync: d}
}

// A receiver filtered by services is a reader that sees only what they
// match: every event type it is sent (a sync that changed or failed, a
// release, a failed release, a lock) is rendered from team a's part
// alone, with no name, namespace, file or error text of team b's (nor a
// cluster-scoped object); a sync of team b's objects alone, or a lock of
// its service, is not sent to it. A receiver without services gets every
// event whole. Before, the sync's whole-repository text went to both.
func TestReceiverFilteredByServicesReadsOnlyItsObjects(t *testing.T) {
	rec := newRecorder(t)
	f := newFixture(t, fmt.Sprintf(`receivers:
  - {name: team-a, type: webhook, url: %[1]s/a, secretFile: DIR/k, services: ["a:*"]}
  - {name: everyone, type: webhook, url: %[1]s/all, secretFile: DIR/k}
`, rec.srv.URL))
	writeFile(t, f.dir, "k", "key")
	f.start(t)
	f.started(t, "team-a", "everyone")
	mine, theirs := "a:deployment/web", "b:deployment/bsecret-api"
	f.record(t, syncEvent("1111111111111111", []history.SyncObject{
		{Namespace: "a", Kind: "Deployment", Name: "web", File: "a/web.yaml", Line: 1, Action: history.SyncChanged},
		{Namespace: "a", Kind: "ConfigMap", Name: "web-broken", File: "a/web.yaml", Line: 9, Action: history.SyncFailed, Error: "denied: reason-a"},
		{Namespace: "b", Kind: "Deployment", Name: "bsecret-api", File: "b/api.yaml", Line: 1, Action: history.SyncCreated},
		{Namespace: "b", Kind: "ConfigMap", Name: "bsecret-token", File: "b/cm.yaml", Line: 1, Action: history.SyncCreated},
		{Namespace: "b", Kind: "ConfigMap", Name: "bsecret-broken", File: "b/cm.yaml", Line: 5, Action: history.SyncFailed, Error: "denied: bsecret-reason"},
		{Kind: "ClusterRole", Name: "bsecret-role", File: "cluster/role.yaml", Action: history.SyncCreated},
	}, "b/bsecret-bad.yaml:1: malformed YAML"))
	f.record(t, syncEvent("2222222222222222", []history.SyncObject{
		{Namespace: "b", Kind: "ConfigMap", Name: "bsecret-only", File: "b/cm.yaml", Line: 1, Action: history.SyncCreated},
	}))
	both := history.Event{Instance: "ops", Type: history.Release, User: "ann", Services: []string{mine, theirs}, Commit: "abc", Message: "ship it",
		Changes: []history.Change{{Service: mine, Container: "app", To: "reg/a:2"}, {Service: theirs, Container: "app", To: "reg/bsecret:2"}}}
	f.record(t, both)
	failed := both
	failed.Type, failed.Error = history.Failed, "rolling out "+theirs+": bsecret-reason"
	f.record(t, failed)
	f.record(t, history.Event{Instance: "ops", Type: history.Lock, User: "ann", Services: []string{theirs}, Message: "bsecret freeze"})
	waitFor(t, "8 deliveries", func() bool { return len(rec.got()) >= 8 })
	time.Sleep(150 * time.Millisecond)
	got := map[string][]map[string]any{}
	for _, h := range rec.got() {
		got[h.Path] = append(got[h.Path], decode(t, h.Body))
	}
	var kinds []string
	for _, m := range got["/a"] {
		kinds = append(kinds, m["kind"].(string))
		body := fmt.Sprint(m)
		for _, l := range []string{"bsecret", "b/", "reason-b", "ClusterRole", " b:"} {
			if strings.Contains(body, l) {
				t.Errorf("team a's receiver reads %q in a %s notification:\n%s", l, m["kind"], body)
			}
		}
	}
	if want := "sync.failed release.succeeded release.failed"; strings.Join(kinds, " ") != want {
		t.Errorf("team a's receiver got %v, want %s", kinds, want)
	}
	if len(got["/a"]) > 0 {
		s := got["/a"][0]
		if s["message"] != "Sync of 111111111111: 0 created, 1 changed, 0 deleted; 1 failed\nconfigured Deployment/a/web" ||
			s["error"] != "a/web.yaml:9: ConfigMap/a/web-broken: denied: reason-a" {
			t.Errorf("team a's sync notification: message %q, error %q", s["message"], s["error"])
		}
	}
	if len(got["/all"]) != 5 {
		t.Fatalf("the receiver without services got %d notifications, want all 5", len(got["/all"]))
	}
	all := fmt.Sprint(got["/all"])
	for _, want := range []string{"created ConfigMap/b/bsecret-token", "ConfigMap/b/bsecret-broken: denied: bsecret-reason", "ClusterRole/bsecret-role", "b/bsecret-bad.yaml", "bsecret-only", "bsecret freeze"} {
		if !strings.Contains(all, want) {
			t.Errorf("the receiver without services lacks %q", want)
		}
	}
}
