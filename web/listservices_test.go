package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
	jobspkg "github.com/fluxd/fluxd/release/jobs"
	"github.com/fluxd/fluxd/web"
)

// cluster says when its workloads change, as platform/kube's informers do,
// so that the daemon keeps its answers.
type cluster struct{ ws []platform.Workload }

func (c *cluster) Workloads(context.Context) ([]platform.Workload, error) { return c.ws, nil }
func (c *cluster) Generation() uint64                                     { return 1 }

type releaser struct{}

func (releaser) Plan(context.Context, release.Spec) (*release.Plan, error) {
	return &release.Plan{}, nil
}
func (releaser) Execute(context.Context, string, release.Spec, history.Type, release.ExecOptions) (*release.Result, error) {
	return nil, errors.New("not in this test")
}
func (releaser) Manifests(context.Context) (string, *gitrepo.Manifests, error) {
	return "rev", &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{}}, nil
}
func (releaser) SetPolicy(context.Context, string, release.PolicyChange) (string, error) {
	return "", errors.New("not in this test")
}
func (releaser) WhatChanged(string, *release.Plan) string { return "" }

type jobs struct{}

func (jobs) Enqueue(context.Context, string, release.Spec, string) (jobspkg.JobUpdate, error) {
	return jobspkg.JobUpdate{}, errors.New("not in this test")
}
func (jobs) Get(context.Context, string, string) (jobspkg.JobUpdate, error) {
	return jobspkg.JobUpdate{}, errors.New("not in this test")
}
func (jobs) List(context.Context, string, int) ([]jobspkg.JobUpdate, error) { return nil, nil }
func (jobs) Cancel(context.Context, string, string) (jobspkg.JobUpdate, error) {
	return jobspkg.JobUpdate{}, errors.New("not in this test")
}
func (jobs) Watch(context.Context, string, string) (<-chan jobspkg.JobUpdate, error) {
	return nil, errors.New("not in this test")
}

// The JSON API's ListServices, now answered from the server's kept JSON,
// answers as the gateway did (the gRPC answer as protojson) for an
// unscoped and a scoped caller and any namespace, and refuses as before:
// no token or a wrong one, a body that is not the request.
func TestJSONListServicesAnswersAsTheGateway(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	a, err := auth.Create(tokens, auth.Identity{Instance: "team-a", Role: auth.Viewer})
	if err != nil {
		t.Fatal(err)
	}
	b, err := auth.Create(tokens, auth.Identity{Instance: "team-b", Role: auth.Viewer})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(tokens, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString("scope team-a namespaces=a\n")
	f.Close()
	store, err := auth.Open(tokens)
	if err != nil {
		t.Fatal(err)
	}
	var ws []platform.Workload
	for _, id := range []string{"a/web", "a/api", "b/db"} {
		ns, name := id[:1], id[2:]
		ws = append(ws, platform.Workload{ID: platform.ID{Namespace: ns, Kind: "deployment", Name: name},
			Containers: []platform.Container{{Name: "app", Image: "reg.example/" + name + ":1.0"}}, Status: "ready"})
	}
	hs, conn := servePage(t, ctx, tokens, store, ws)
	client := fluxdv1.NewFluxServiceClient(conn)

	post := func(token, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/fluxd.v1.FluxService/ListServices", bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	for _, tc := range []struct{ who, token, ns string }{
		{"unscoped", b, ""}, {"unscoped", b, "a"}, {"unscoped", b, "nope"}, {"scoped", a, ""}, {"scoped", a, "b"}, {"unscoped", b, ""},
	} {
		grpcResp, err := client.ListServices(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tc.token), &fluxdv1.ListServicesRequest{Namespace: tc.ns})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(grpcResp)
		code, got := post(tc.token, `{"namespace":"`+tc.ns+`"}`)
		if code != http.StatusOK {
			t.Fatalf("%s, namespace %q: %d %s", tc.who, tc.ns, code, got)
		}
		var w, g any
		_ = json.Unmarshal(want, &w)
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s, namespace %q: the answer is not JSON: %v\n%.300s", tc.who, tc.ns, err, got)
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("%s, namespace %q (-gateway's +kept):\n%s", tc.who, tc.ns, diff)
		}
	}
	if code, _ := post(b, ""); code != http.StatusOK {
		t.Errorf("an empty body (all namespaces): %d, want 200", code)
	}
	for _, tc := range []struct {
		token, body string
		code        int
	}{
		{"", `{}`, http.StatusUnauthorized},
		{"fxd_not-a-token", `{}`, http.StatusUnauthorized},
		{b, `{"namespace": 7}`, http.StatusBadRequest},
		{b, `not json`, http.StatusBadRequest},
	} {
		if code, body := post(tc.token, tc.body); code != tc.code || !json.Valid(body) {
			t.Errorf("token %q, body %q: %d %s, want %d and a JSON error", tc.token, tc.body, code, body, tc.code)
		}
	}
}

// servePage serves the page's JSON API over a daemon of workloads ws,
// through the in-process connection as fluxd does, until ctx ends.
func servePage(t *testing.T, ctx context.Context, tokens string, store *auth.Store, ws []platform.Workload) (*httptest.Server, *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	log := slog.New(slog.DiscardHandler)
	d := daemon.New(daemon.Config{GitRefresh: time.Minute, Listen: "127.0.0.1:0", TokensFile: tokens, Version: "v-test"},
		daemon.Deps{Cluster: &cluster{ws: ws}, Releaser: releaser{}, Jobs: jobs{}}, log)
	srv := daemon.NewServer(d, store, log)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis, time.Second) }()
	t.Cleanup(func() { cancel(); <-served })
	conn, err := srv.InProcess()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h, err := web.New(ctx, web.Config{Auth: store, Conn: conn, Hub: web.NewHub(4)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs, conn
}

// The page lists 12,000 workloads: an answer past gRPC's default 4 MiB
// (the JSON is about 6 MiB) still reaches it ("received message larger
// than max" before).
func TestJSONListServicesOfManyWorkloads(t *testing.T) {
	ctx := context.Background()
	tokens := filepath.Join(t.TempDir(), "tokens")
	tok, err := auth.Create(tokens, auth.Identity{Instance: "team-a", Role: auth.Viewer})
	if err != nil {
		t.Fatal(err)
	}
	store, err := auth.Open(tokens)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12000
	ws := make([]platform.Workload, 0, n)
	for i := range n {
		ws = append(ws, platform.Workload{ID: platform.ID{Namespace: fmt.Sprintf("team-%03d", i%120), Kind: "deployment", Name: fmt.Sprintf("service-%05d", i)},
			Containers: []platform.Container{{Name: "app", Image: fmt.Sprintf("registry.example.com/platform/service-%05d:1.%d.0", i, i%9)}},
			Status:     "ready", Replicas: platform.Replicas{Desired: 2, Updated: 2, Ready: 2, Available: 2}})
	}
	hs, _ := servePage(t, ctx, tokens, store, ws)
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/fluxd.v1.FluxService/ListServices", bytes.NewBufferString(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %.300s", resp.StatusCode, body)
	}
	var got fluxdv1.ListServicesResponse
	if err := protojson.Unmarshal(body, &got); err != nil {
		t.Fatalf("the answer does not parse: %v", err)
	}
	if len(got.Services) != n || len(body) <= 4<<20 {
		t.Errorf("%d services in %d bytes, want %d in over 4 MiB", len(got.Services), len(body), n)
	}
}
