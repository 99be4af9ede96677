package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/internal/localstack"
)

func TestFluxctlVersionAndListServices(t *testing.T) {
	f := sharedFluxd(t)
	env := []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}

	out, stderr, code := fluxctl(t, env, "version")
	if code != 0 || !strings.Contains(out, "client: ") || !strings.Contains(out, "server: ") || !strings.Contains(out, "instance: "+instance) {
		t.Fatalf("fluxctl version: exit %d\n%s%s", code, out, stderr)
	}

	out, stderr, code = fluxctl(t, env, "list-services", "-o", "json")
	if code != 0 {
		t.Fatalf("list-services -o json: exit %d: %s", code, stderr)
	}
	var services []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &services); err != nil {
		t.Fatalf("list-services -o json is not JSON: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, s := range services {
		got[s.ID] = s.Status
	}
	for _, id := range localstack.ExampleServices {
		if got[id] != "ready" {
			t.Errorf("list-services: %s has status %q, want ready (all: %v)", id, got[id], got)
		}
	}

	out, _, code = fluxctl(t, env, "list-services", "--namespace", "default")
	if code != 0 || !strings.HasPrefix(out, "SERVICE") || !strings.Contains(out, "default:deployment/helloworld") {
		t.Errorf("list-services table: exit %d\n%s", code, out)
	}
}

func TestFluxctlErrorsAreHumane(t *testing.T) {
	f := sharedFluxd(t)
	unused, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"no url", nil, []string{"version"}, []string{"no fluxd address is set", "FLUX_URL"}},
		{"nobody listening", []string{"FLUX_URL=http://" + unused, "FLUX_TOKEN=x"}, []string{"list-services"},
			[]string{"cannot reach fluxd at " + unused, "Likely causes", "Try:"}},
		{"no token", []string{"FLUX_URL=" + f.Addr}, []string{"list-services"}, []string{"no API token", "FLUX_TOKEN"}},
		{"wrong token", []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=fxd_nope"}, []string{"version"}, []string{"not accepted"}},
		{"viewer mutates", []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}, []string{"lock", "default:deployment/helloworld"},
			[]string{"needs the deployer role"}},
		{"unknown service", []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"]}, []string{"automate", "helloword"},
			[]string{`no service "helloword"`, "Did you mean default:deployment/helloworld?"}},
		{"bad output", []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}, []string{"list-services", "-o", "xml"},
			[]string{"use table, json or yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := fluxctl(t, tc.env, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0, want non-zero; stdout:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "panic") {
				t.Errorf("fluxctl panicked:\n%s", stderr)
			}
		})
	}
}

func TestTokenCreatedWhileRunningWorksAtOnce(t *testing.T) {
	f := sharedFluxd(t)
	out, stderr, code := run(t, nil, filepath.Join(binDir, "fluxd"), "token", "create",
		"--tokens-file", f.TokensFile, "--instance", "other-team", "--role", "viewer")
	if code != 0 {
		t.Fatalf("fluxd token create: exit %d: %s", code, stderr)
	}
	token := strings.TrimSpace(out)
	raw, err := os.ReadFile(f.TokensFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), token) {
		t.Fatal("the tokens file holds the plain token")
	}
	out, stderr, code = fluxctl(t, []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + token}, "version")
	if code != 0 || !strings.Contains(out, "instance: other-team") || !strings.Contains(out, "role: viewer") {
		t.Fatalf("fluxctl version with the new token: exit %d\n%s%s", code, out, stderr)
	}
}

func TestGrpcurlListsTheServiceThroughReflection(t *testing.T) {
	f := sharedFluxd(t)
	grpcurl := filepath.Join(stackBinDir(t), "grpcurl")
	out, stderr, code := run(t, nil, grpcurl, "-plaintext", "-H", "authorization: Bearer "+f.Tokens["viewer"], f.Addr, "list")
	if code != 0 || !strings.Contains(out, "fluxd.v1.FluxService") {
		t.Fatalf("grpcurl list with token: exit %d\n%s%s", code, out, stderr)
	}
	out, _, code = run(t, nil, grpcurl, "-plaintext", "-H", "authorization: Bearer "+f.Tokens["viewer"], f.Addr, "fluxd.v1.FluxService/Version")
	if code != 0 || !strings.Contains(out, `"instance": "e2e"`) {
		t.Fatalf("grpcurl Version: exit %d\n%s", code, out)
	}
	_, stderr, code = run(t, nil, grpcurl, "-plaintext", f.Addr, "list")
	if code == 0 || !strings.Contains(stderr, "Unauthenticated") {
		t.Fatalf("grpcurl list without token: exit %d, stderr:\n%s", code, stderr)
	}
}
