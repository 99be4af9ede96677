package notify_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxd/fluxd/notify"
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
