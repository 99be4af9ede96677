package daemon

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// bytesCodec sends requests as protobuf and keeps answers as bytes, as
// the web page's JSON API does.
type bytesCodec struct{ encoding.CodecV2 }

func (c bytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}

// listJSON calls ListServices asking for the JSON API's answer, and says
// whether it came as JSON.
func listJSON(t *testing.T, f *fixture, ctx context.Context, ns string) ([]byte, bool) {
	t.Helper()
	var out []byte
	var header metadata.MD
	ctx = metadata.AppendToOutgoingContext(ctx, AnswerHeader, "json")
	if err := f.conn.Invoke(ctx, fluxdv1.FluxService_ListServices_FullMethodName, &fluxdv1.ListServicesRequest{Namespace: ns}, &out,
		grpc.ForceCodecV2(bytesCodec{encoding.GetCodecV2(grpcproto.Name)}), grpc.Header(&header)); err != nil {
		t.Fatalf("ListServices(%q) as JSON: %v", ns, err)
	}
	return out, len(header.Get(AnswerHeader)) == 1 && header.Get(AnswerHeader)[0] == "json"
}

// jsonIDs are the service IDs of a JSON answer, sorted.
func jsonIDs(t *testing.T, b []byte) string {
	t.Helper()
	var resp struct {
		Services []struct {
			ID string `json:"id"`
		} `json:"services"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatalf("the JSON answer does not parse: %v\n%.300s", err, b)
	}
	var ids []string
	for _, s := range resp.Services {
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)
	return strings.Join(ids, " ")
}

func sortedIDs(ls *fluxdv1.ListServicesResponse) string {
	ids := strings.Fields(serviceIDs(ls))
	sort.Strings(ids)
	return strings.Join(ids, " ")
}

func answerWorkloads(names ...string) []platform.Workload {
	var ws []platform.Workload
	for _, n := range names {
		ns, name, _ := strings.Cut(n, "/")
		ws = append(ws, platform.Workload{ID: platform.ID{Namespace: ns, Kind: "deployment", Name: name},
			Containers: []platform.Container{{Name: "app", Image: "reg.example/" + name + ":1.0"}}, Status: "ready"})
	}
	return ws
}

// The JSON API's answer to ListServices, sent from the kept JSON, is the
// answer the gateway would make of the protobuf one (protojson, unpopulated
// fields emitted), for every caller and namespace, kept or not; and a
// caller not in process gets protobuf whatever it asks.
func TestListServicesJSONIsTheGatewaysAnswer(t *testing.T) {
	ws := answerWorkloads("a/web", "a/api", "b/secret-api", "b/db")
	for _, bc := range []struct {
		name    string
		cluster Cluster
	}{
		{"kept", &genCluster{stubCluster: stubCluster{workloads: ws}}},
		{"not kept", &stubCluster{workloads: ws}},
	} {
		t.Run(bc.name, func(t *testing.T) {
			f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: bc.cluster, Releaser: stubReleaser{}, Jobs: stubJobs{}, Git: &stubGit{}})
			addScope(t, f, "scope team-a namespaces=a\n")
			for _, tok := range []string{f.tokens[auth.Viewer], f.other[auth.Viewer]} {
				for _, ns := range []string{"", "a", "b", "nope", "", "a"} {
					ctx := withToken(tok)
					want, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{Namespace: ns})
					if err != nil {
						t.Fatal(err)
					}
					wantJSON, err := jsonOptions.Marshal(want)
					if err != nil {
						t.Fatal(err)
					}
					got, asJSON := listJSON(t, f, ctx, ns)
					if !asJSON {
						t.Fatalf("namespace %q: the answer did not come as JSON", ns)
					}
					var w, g any
					if err := json.Unmarshal(wantJSON, &w); err != nil {
						t.Fatal(err)
					}
					if err := json.Unmarshal(got, &g); err != nil {
						t.Fatalf("namespace %q: the JSON answer does not parse: %v\n%.300s", ns, err, got)
					}
					if diff := cmp.Diff(w, g); diff != "" {
						t.Errorf("namespace %q (-gateway's +kept):\n%s", ns, diff)
					}
				}
			}
		})
	}
	// A call from the network (not the in-process listener) that asks
	// for JSON is answered in protobuf.
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(AnswerHeader, "json"))
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000}})
	if wantsJSON(ctx) {
		t.Error("a TCP caller asking for JSON would get it")
	}
}

func addScope(t *testing.T, f *fixture, line string) {
	t.Helper()
	fh, err := os.OpenFile(f.tokensFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(line); err != nil {
		t.Fatal(err)
	}
}

// The kept answer is per scope: a scoped caller and an unscoped one,
// calling in turn while nothing changes, each get their own (in protobuf
// and in JSON), both kept; when the services change both answers follow,
// and when the tokens file changes the scope, the scoped caller's answer
// follows the new scope.
func TestKeptAnswerIsPerScopeAndFollowsChanges(t *testing.T) {
	c := &atomicGenCluster{stubCluster: stubCluster{workloads: answerWorkloads("a/web", "a/api", "other/secret-api", "other/db")}}
	f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}, Git: &stubGit{}})
	original, err := os.ReadFile(f.tokensFile)
	if err != nil {
		t.Fatal(err)
	}
	addScope(t, f, "scope team-a namespaces=a\n")
	scoped, unscoped := withToken(f.tokens[auth.Viewer]), withToken(f.other[auth.Viewer])
	check := func(when, wantScoped, wantAll string) {
		t.Helper()
		for range 3 {
			for _, call := range []struct {
				ctx  context.Context
				want string
			}{{scoped, wantScoped}, {unscoped, wantAll}} {
				ls, err := f.client.ListServices(call.ctx, &fluxdv1.ListServicesRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if got := sortedIDs(ls); got != call.want {
					t.Errorf("%s: protobuf answer %s, want %s", when, got, call.want)
				}
				b, _ := listJSON(t, f, call.ctx, "")
				if got := jsonIDs(t, b); got != call.want {
					t.Errorf("%s: JSON answer %s, want %s", when, got, call.want)
				}
			}
		}
	}
	check("at first", "a:deployment/api a:deployment/web",
		"a:deployment/api a:deployment/web other:deployment/db other:deployment/secret-api")
	f.daemon.view.mu.Lock()
	var keys []string
	for k := range f.daemon.view.answers {
		keys = append(keys, "["+k.scope+"]")
	}
	f.daemon.view.mu.Unlock()
	sort.Strings(keys)
	if got := strings.Join(keys, " "); got != "[] [namespaces=a]" {
		t.Errorf("kept answers for scopes %s, want one unscoped and one for namespaces=a", got)
	}

	// The services change: both answers follow.
	c.workloads = answerWorkloads("a/web", "a/api", "a/new", "other/secret-api", "other/db", "other/more")
	c.gen.Add(1)
	// The next view comes with both answers made, in both encodings
	// the callers used, before anyone asks (nextAnswers).
	if _, _, err := f.daemon.viewBuilt(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.daemon.view.mu.Lock()
	made := 0
	for k, a := range f.daemon.view.answers {
		if f.daemon.view.answersOf == f.daemon.view.built && a.pb != nil && a.json != nil {
			made++
		} else {
			t.Errorf("the new view's answer for scope [%s] was not made with it", k.scope)
		}
	}
	f.daemon.view.mu.Unlock()
	if made != 2 {
		t.Errorf("%d answers made with the new view, want 2", made)
	}
	check("after the cluster changed", "a:deployment/api a:deployment/new a:deployment/web",
		"a:deployment/api a:deployment/new a:deployment/web other:deployment/db other:deployment/more other:deployment/secret-api")

	// The scope changes in the tokens file (nothing else changed): the
	// scoped caller's answer follows it.
	if err := os.WriteFile(f.tokensFile, append(original, "scope team-a namespaces=other\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	check("after the scope changed", "other:deployment/db other:deployment/more other:deployment/secret-api",
		"a:deployment/api a:deployment/new a:deployment/web other:deployment/db other:deployment/more other:deployment/secret-api")
}

// A new view makes the answers its predecessor's callers asked for, not
// every answer ever asked: one call of list-services for a namespace
// (or a scope whose token has since gone) must not have every later view
// convert and encode that answer again, for as long as fluxd runs.
func TestNextViewMakesOnlyTheAnswersAskedOfTheViewBefore(t *testing.T) {
	c := &atomicGenCluster{stubCluster: stubCluster{workloads: answerWorkloads("a/web", "a/api", "b/db")}}
	f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}, Git: &stubGit{}})
	ctx := withToken(f.other[auth.Viewer])
	if _, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{Namespace: "a"}); err != nil {
		t.Fatal(err)
	}
	made := func() []string {
		t.Helper()
		if _, _, err := f.daemon.viewBuilt(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.daemon.view.mu.Lock()
		defer f.daemon.view.mu.Unlock()
		var keys []string
		if f.daemon.view.answersOf == f.daemon.view.built {
			for k := range f.daemon.view.answers {
				keys = append(keys, "["+k.scope+"/"+k.namespace+"]")
			}
		}
		return keys
	}
	// The view after the call: made, as the view before was asked for it.
	c.gen.Add(1)
	if keys := made(); len(keys) != 1 {
		t.Errorf("the view after a call made answers %v, want the one asked for", keys)
	}
	// Nobody asked that view anything: the views after it make nothing.
	for i := range 3 {
		c.gen.Add(1)
		if keys := made(); len(keys) != 0 {
			t.Errorf("view %d after the only call, asked nothing before it, made answers %v", i+2, keys)
		}
	}
}
