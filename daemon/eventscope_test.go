package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/syncer"
)

// dirClone is a git clone that is a plain directory (the sync reads it).
type dirClone struct{ root, rev string }

func (c dirClone) Exclusive(_ context.Context, fn func() error) error { return fn() }
func (c dirClone) Read(_ context.Context, _, _ bool, fn func(rev, root string, paths []string) error) error {
	return fn(c.rev, c.root, []string{"."})
}

// refusingApplier creates every object but those whose name says
// "broken", which the API server refuses with a message naming them.
type refusingApplier struct{}

func (refusingApplier) Apply(_ context.Context, objs []platform.Object, _ platform.SyncOptions) ([]platform.ObjectResult, error) {
	var out []platform.ObjectResult
	for _, o := range objs {
		r := platform.ObjectResult{Ref: o.Ref(), Where: o.Where(), Action: platform.ActionCreated}
		if strings.Contains(o.Ref().Name, "broken") {
			r.Action, r.Error = platform.ActionFailed, "admission webhook denied "+o.Ref().Name+": reason-"+o.Ref().Namespace
		}
		out = append(out, r)
	}
	return out, nil
}

// syncInto runs one real sync of the files into store's history.
func syncInto(t *testing.T, store *sqlite.Store, rev string, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := syncer.New(syncer.Config{Interval: time.Minute}, dirClone{root: root, rev: rev}, refusingApplier{}, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := s.Sync(context.Background(), false, false); err != nil {
		t.Fatal(err)
	}
}

func object(kind, ns, name string) string {
	apiVersion := "v1"
	switch kind {
	case "Deployment":
		apiVersion = "apps/v1"
	case "ClusterRole":
		apiVersion = "rbac.authorization.k8s.io/v1"
	}
	meta := "name: " + name
	if ns != "" {
		meta += ", namespace: " + ns
	}
	return "apiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata: {" + meta + "}\n"
}

// Every event type, recorded as it names both teams (team a's service
// web in namespace a, and team b's: its service secret-api, its
// ConfigMaps, one of which the API server refuses with a message naming
// it, a cluster-scoped ClusterRole, a file that cannot be read), read by
// team a's scoped viewer through History: each type is shown to it (so
// the suite cannot pass by showing nothing), and nothing of team b shows
// in any field: not its services, image changes, object names,
// namespaces, files or error text. A sync's message and error are
// rendered from team a's objects alone, its own failure included; a sync
// of team b's objects alone is not shown; a sync recorded by an earlier
// fluxd, without its objects, shows no text. The same history read by
// an unscoped instance shows team b's, so the fixture does hold them.
// A type added to history.Types is walked here too; one the suite cannot
// record naming both teams fails it.
func TestEveryEventKeepsToTheCallersScope(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	mine, theirs := scopeMine.String(), scopeTheirs.String()
	for _, typ := range history.Types {
		if typ == history.Sync {
			continue
		}
		ev := history.Event{Instance: "team-a", Type: typ, Services: []string{mine, theirs}, User: "alice", Message: "by alice",
			Changes: []history.Change{
				{Service: mine, Container: "app", To: "reg.example/a/web:2",
					Verification: &history.Verification{Outcome: "verified", Profiles: []string{"team-a"}, Digest: "sha256:aaaa", Detail: "profile team-a: verified by key sha256:aaaa (/etc/fluxd/team-a.pub)"}},
				// Team b's verification names its profile, key file and
				// digest: none of it reaches team a.
				{Service: theirs, Container: "app", To: "reg.example/b/secret-api:2",
					Verification: &history.Verification{Outcome: "failed", Profiles: []string{"bsecret-profile"}, Digest: "sha256:bsecret", Detail: "profile bsecret-profile: failed (wrong-key): reason-b"}},
			}}
		switch typ {
		case history.Failed, history.Rollback, history.Cancelled:
			ev.Error = "rolling out " + theirs + " failed: bsecret-reason"
		}
		if _, err := store.Record(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	// Recorded by an earlier fluxd: its text names both teams' objects.
	if _, err := store.Record(ctx, history.Event{Instance: history.SyncInstance, Type: history.Sync, User: "fluxd", Commit: "0ld",
		Services: []string{mine, theirs}, Message: "Sync of 0ld: 2 created\ncreated ConfigMap/b/bsecret-old", Error: "ConfigMap/b/bsecret-old: bsecret-reason"}); err != nil {
		t.Fatal(err)
	}
	// One commit with both teams' objects; then one with team b's alone.
	syncInto(t, store, "1111111111111111", map[string]string{
		"a/web.yaml":         object("Deployment", "a", "web") + "---\n" + object("ConfigMap", "a", "web-broken"),
		"b/secret-api.yaml":  object("Deployment", "b", "secret-api"),
		"b/bsecret.yaml":     object("ConfigMap", "b", "bsecret-token") + "---\n" + object("ConfigMap", "b", "bsecret-broken"),
		"b/bsecret-bad.yaml": "kind: [not yaml",
		"cluster/role.yaml":  object("ClusterRole", "", "bsecret-role"),
	})
	syncInto(t, store, "2222222222222222", map[string]string{"b/bsecret.yaml": object("ConfigMap", "b", "bsecret-only")})

	cluster, m := scopeWorld()
	f := newFixtureWith(t, Config{}, Deps{Cluster: cluster, Releaser: scopeReleaser{m: m, specs: make(chan release.Spec, 1)}, Jobs: stubJobs{}, History: store, Sync: scopeSync{}, Images: stubImages{}})
	fh, err := os.OpenFile(f.tokensFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString("scope team-a namespaces=a\n"); err != nil {
		t.Fatal(err)
	}
	fh.Close()

	// Team b's, in any form it could take in an answer.
	leaks := []string{"bsecret", "secret-api", "reason-b", "ClusterRole", "/b/", "b/", " b:", "b:deployment"}
	for _, req := range []*fluxdv1.HistoryRequest{{}, {Service: "web"}, {Type: string(history.Sync)}} {
		h, err := f.client.History(withToken(f.tokens[auth.Viewer]), req)
		if err != nil {
			t.Fatalf("History %v: %v", req, err)
		}
		for _, ev := range h.GetEvents() {
			text := prototext.Format(ev)
			for _, l := range leaks {
				if strings.Contains(text, l) {
					t.Errorf("History %v: team a's viewer reads %q in a %s event:\n%s", req, l, ev.GetType(), text)
				}
			}
		}
	}
	h, err := f.client.History(withToken(f.tokens[auth.Viewer]), &fluxdv1.HistoryRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]*fluxdv1.Event{}
	for _, ev := range h.GetEvents() {
		seen[ev.GetType()] = append(seen[ev.GetType()], ev)
		if got := strings.Join(ev.GetServices(), " "); ev.GetType() != string(history.Sync) && got != mine {
			t.Errorf("a %s event names services %q, want only %s", ev.GetType(), got, mine)
		}
	}
	for _, typ := range history.Types {
		if len(seen[string(typ)]) == 0 {
			t.Errorf("team a's viewer sees no %s event; it should see its own part of one", typ)
		}
	}
	// Its own released image keeps its verification.
	if rel := seen[string(history.Release)]; len(rel) == 1 {
		if ch := rel[0].GetChanges(); len(ch) != 1 || ch[0].GetVerification().GetOutcome() != "verified" || ch[0].GetVerification().GetDigest() != "sha256:aaaa" {
			t.Errorf("team a's release shows changes %v; want its own image with its verification", ch)
		}
	}
	if syncs := seen[string(history.Sync)]; len(syncs) != 2 {
		t.Errorf("team a's viewer sees %d sync events, want 2 (the one with its objects, and the earlier fluxd's naming its service); not the sync of team b's alone", len(syncs))
	} else {
		now, old := syncs[0], syncs[1]
		wantMsg := "Sync of 111111111111: 1 created, 0 changed, 0 deleted; 1 failed\ncreated Deployment/a/web"
		if now.GetMessage() != wantMsg || !strings.Contains(now.GetError(), "a/web.yaml:") || !strings.HasSuffix(now.GetError(), "ConfigMap/a/web-broken: admission webhook denied web-broken: reason-a") {
			t.Errorf("team a's view of the sync:\nmessage %q\nerror %q\nwant message %q and its own failure as the error", now.GetMessage(), now.GetError(), wantMsg)
		}
		if strings.Join(now.GetServices(), " ") != mine {
			t.Errorf("team a's view of the sync names services %v, want %s", now.GetServices(), mine)
		}
		if strings.Contains(old.GetMessage(), "created") || !strings.Contains(old.GetError(), "not shown") {
			t.Errorf("team a's view of the earlier fluxd's sync: %q / %q; want no objects and no failures", old.GetMessage(), old.GetError())
		}
	}
	// The unscoped instance reads team b's objects: the fixture holds them.
	all, err := f.client.History(withToken(f.other[auth.Viewer]), &fluxdv1.HistoryRequest{Type: string(history.Sync)})
	if err != nil {
		t.Fatal(err)
	}
	text := prototext.Format(all)
	for _, want := range []string{"created ConfigMap/b/bsecret-token", "ConfigMap/b/bsecret-broken: admission webhook denied bsecret-broken", "created ClusterRole/bsecret-role", "b/bsecret-bad.yaml", "bsecret-only"} {
		if !strings.Contains(text, want) {
			t.Errorf("the unscoped instance's history lacks %q:\n%s", want, text)
		}
	}
}
