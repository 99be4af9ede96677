package notify_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/notify"
	"github.com/prometheus/client_golang/prometheus"
)

// TestLoadNamesTheLine: each problem of a bad file is reported at once,
// with the line of the receiver (or of the YAML error).
func TestLoadNamesTheLine(t *testing.T) {
	dir := t.TempDir()
	tok := writeFile(t, dir, "tok", "t")
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"unknown type and missing secret", `receivers:
  - name: ok
    type: slack
    url: https://hooks.example/x
  - name: bad
    type: mattermost
    url: https://x.example
  - name: hook
    type: webhook
    url: https://x.example
`, []string{`line 5: receiver "bad": type "mattermost" is not one of`, `line 8: receiver "hook": secretFile is missing`}},
		{"unknown field", "receivers:\n  - name: a\n    type: slack\n    urll: https://x\n", []string{"line 4: field urll not found"}},
		{"wrong YAML type", "receivers:\n  - type: slack\n    name: [a, b]\n", []string{"line 3: cannot unmarshal"}},
		{"bad filters and forge", `receivers:
  - name: gh
    type: github
    url: https://api.github.com
    secretFile: ` + tok + `
    repository: justname
    events: [deploys]
    services: [""]
`, []string{`line 2: receiver "gh": repository "justname" is not owner/name`, `events: "deploys" is not one of`, "an empty glob"}},
		{"duplicate names", "receivers:\n  - {name: a, type: slack, url: 'https://x'}\n  - {name: a, type: slack, url: 'https://y'}\n", []string{`line 3: receiver "a": the name is used already at line 2`}},
		{"missing secret file", "receivers:\n  - {name: a, type: webhook, url: 'https://x', secretFile: /nonexistent/k}\n", []string{`line 2: receiver "a": secretFile: open /nonexistent/k`}},
		{"url that is not http", "receivers:\n  - {name: a, type: discord, url: 'ftp://secret@x'}\n", []string{"url is not an http:// or https:// URL"}},
		{"empty", "", []string{"it is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := notify.Load(writeFile(t, dir, "n.yaml", tc.file))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret@") {
				t.Errorf("the error quotes the URL: %v", err)
			}
		})
	}
}

// TestBadEditKeepsTheConfig: a file that becomes bad is refused (and
// counted) and the previous config stays; a good edit is taken.
func TestBadEditKeepsTheConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "n.yaml")
	good := "receivers:\n  - {name: a, type: slack, url: 'https://x.example/1'}\n"
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w, err := notify.NewWatcher(path, 10*time.Millisecond, notify.NewMetrics(reg), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	cfg, changed := w.Config()
	os.WriteFile(path, []byte("receivers:\n  - {name: a, type: nope}\n"), 0o600)
	time.Sleep(200 * time.Millisecond)
	select {
	case <-changed:
		t.Fatal("a bad edit was taken")
	default:
	}
	if now, _ := w.Config(); now != cfg || now.Receivers[0].URL != "https://x.example/1" {
		t.Fatalf("config after a bad edit: %+v", now)
	}
	os.WriteFile(path, []byte("receivers:\n  - {name: b, type: slack, url: 'https://x.example/2'}\n"), 0o600)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("a good edit was not taken")
	}
	if now, _ := w.Config(); now.Receivers[0].Name != "b" {
		t.Errorf("config after a good edit: %+v", now.Receivers)
	}
}

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
