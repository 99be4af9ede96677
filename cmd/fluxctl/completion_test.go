package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// completionServer answers the two listings completion asks for.
type completionServer struct {
	fluxdv1.UnimplementedFluxServiceServer
}

func (completionServer) ListServices(context.Context, *fluxdv1.ListServicesRequest) (*fluxdv1.ListServicesResponse, error) {
	return &fluxdv1.ListServicesResponse{Services: []*fluxdv1.Service{
		{Id: "default:deployment/web"}, {Id: "default:deployment/redis"}, {Id: "prod:deployment/redis"},
	}}, nil
}

func (completionServer) ListPipelines(context.Context, *fluxdv1.ListPipelinesRequest) (*fluxdv1.ListPipelinesResponse, error) {
	return &fluxdv1.ListPipelinesResponse{Pipelines: []*fluxdv1.Pipeline{
		{Name: "web", Stages: []string{"dev", "staging", "prod"}}, {Name: "api", Stages: []string{"dev", "prod"}},
	}}, nil
}

func (completionServer) ListJobs(context.Context, *fluxdv1.ListJobsRequest) (*fluxdv1.ListJobsResponse, error) {
	return &fluxdv1.ListJobsResponse{Jobs: []*fluxdv1.Job{{Id: "j-1"}, {Id: "j-2"}}}, nil
}

// The shell's Tab runs `fluxctl __complete ...`: with FLUX_URL set, it
// lists what fluxd answers, through the same connection code as the
// commands.
func TestDynamicCompletion(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fluxdv1.RegisterFluxServiceServer(srv, completionServer{})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	t.Setenv("FLUX_URL", l.Addr().String())
	t.Setenv("FLUX_TOKEN", "t")

	complete := func(args ...string) []string {
		t.Helper()
		root, _ := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append([]string{"__complete"}, args...))
		if err := root.Execute(); err != nil {
			t.Fatalf("__complete %v: %v", args, err)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if !strings.HasPrefix(line, ":") { // the last line is cobra's directive
				got = append(got, strings.SplitN(line, "\t", 2)[0])
			}
		}
		return got
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", ""}, "default:deployment/web web default:deployment/redis prod:deployment/redis"},
		{[]string{"lock", "we"}, "web"},
		{[]string{"lock", "x", ""}, ""},
		{[]string{"release", "-s", "prod"}, "prod:deployment/redis"},
		{[]string{"job", "j-"}, "j-1 j-2"},
		{[]string{"history", "--type", "auto"}, "automated-release automate"},
		{[]string{"list-services", "-o", ""}, "table json yaml"},
		{[]string{"stages", ""}, "resume web api"}, // its subcommand, then the pipelines
		{[]string{"stages", "resume", "p"}, "prod"},
		{[]string{"bundles", "web", ""}, ""},
		{[]string{"promote", "--to", ""}, "dev staging prod"},
		{[]string{"approve", "--pipeline", "a"}, "api"},
		{[]string{"approve", "--stage", "st"}, "staging"},
	} {
		if got := strings.Join(complete(tc.args...), " "); got != tc.want {
			t.Errorf("complete %q: %q; want %q", tc.args, got, tc.want)
		}
	}
}
