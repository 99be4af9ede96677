package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
)

// hostileTags adds tags to every tag list of the registry behind it, as a
// hostile or broken registry could.
type hostileTags struct {
	next  http.Handler
	extra []string
}

func (h hostileTags) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/tags/list") {
		h.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	h.next.ServeHTTP(rec, r)
	var body struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	body.Tags = append(body.Tags, h.extra...)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func TestTagsBreakingTheGrammarAreDropped(t *testing.T) {
	hostile := []string{
		"1.0\nimage: evil",
		`a"b`,
		"1.1 # comment",
		"",
		"-leading-dash",
		".hidden",
		"with/slash",
		"naïve",
		strings.Repeat("a", 129),
	}
	srv := httptest.NewServer(hostileTags{next: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), extra: hostile})
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/app"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	push(t, repo+":1.0", imageAt(t, t0, nil))
	push(t, repo+":_under", imageAt(t, t0.Add(time.Hour), nil))
	push(t, repo+":"+strings.Repeat("b", 128), imageAt(t, t0.Add(2*time.Hour), nil))

	var logs bytes.Buffer
	c, err := New(Config{Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := []string{"1.0", "_under", strings.Repeat("b", 128)}
	tags, err := c.Tags(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	imgs, err := c.Images(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, img := range imgs {
		got = append(got, img.Tag)
	}
	if diff := cmp.Diff([]string{strings.Repeat("b", 128), "_under", "1.0"}, got); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}

	// One warning for the repository, naming it; debug lines after.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "time=") || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[1], "level=DEBUG") {
		t.Fatalf("want a warning then a debug line, got:\n%s", logs.String())
	}
	t.Log(lines[0])
	for _, s := range []string{"repository=" + repo, "dropped=9", `1.0\\nimage: evil`} {
		if !strings.Contains(lines[0], s) {
			t.Errorf("warning %q does not say %q", lines[0], s)
		}
	}
}
