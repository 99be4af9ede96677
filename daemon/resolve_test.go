package daemon

import (
	"strings"
	"testing"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	svc := func(ns, kind, name string) Service {
		return Service{ID: platform.ID{Namespace: ns, Kind: kind, Name: name}}
	}
	all := []Service{
		svc("default", "deployment", "helloworld"),
		svc("default", "deployment", "redis"),
		svc("prod", "deployment", "redis"),
		svc("prod", "statefulset", "db"),
		svc("deploy", "deployment", "web"),
		svc("apps", "helmrelease", "podinfo"),
	}
	for _, tc := range []struct {
		in, want string
		kind     fluxerr.Kind
		msg      string
	}{
		{in: "default:deployment/helloworld", want: "default:deployment/helloworld"},
		{in: "helloworld", want: "default:deployment/helloworld"},
		{in: "prod/redis", want: "prod:deployment/redis"},
		{in: "db", want: "prod:statefulset/db"},
		{in: "redis", kind: fluxerr.User, msg: "ambiguous: it could be default:deployment/redis, prod:deployment/redis"},
		{in: "helloworl", kind: fluxerr.Missing, msg: "Did you mean default:deployment/helloworld?"},
		{in: "default:deployment/nope", kind: fluxerr.Missing, msg: `no service "default:deployment/nope"`},
		{in: "default:pod/x", kind: fluxerr.User, msg: "fluxd manages"},
		{in: "", kind: fluxerr.User, msg: "no service given"},
		// kubectl's forms.
		{in: "deployment/helloworld", want: "default:deployment/helloworld"},
		{in: "deploy/helloworld", want: "default:deployment/helloworld"},
		{in: "deployments.apps/helloworld", want: "default:deployment/helloworld"},
		{in: "sts/db", want: "prod:statefulset/db"},
		{in: "statefulset/helloworld", kind: fluxerr.Missing, msg: `no service "statefulset/helloworld"`},
		{in: "deployment/redis", kind: fluxerr.User, msg: "ambiguous"},
		// HelmReleases, as kubectl names them.
		{in: "hr/podinfo", want: "apps:helmrelease/podinfo"},
		{in: "helmreleases.helm.toolkit.fluxcd.io/podinfo", want: "apps:helmrelease/podinfo"},
		{in: "apps:helmrelease/podinfo", want: "apps:helmrelease/podinfo"},
		// A namespace named like a kind is a namespace first.
		{in: "deploy/web", want: "deploy:deployment/web"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := resolveIn(all, tc.in)
			if tc.want != "" {
				if err != nil || got.ID.String() != tc.want {
					t.Fatalf("resolve(%q) = %v, %v; want %s", tc.in, got.ID, err, tc.want)
				}
				return
			}
			if err == nil || fluxerr.KindOf(err) != tc.kind || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("resolve(%q) error = %v (kind %v); want kind %v containing %q", tc.in, err, fluxerr.KindOf(err), tc.kind, tc.msg)
			}
		})
	}
}
