package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/fluxd/fluxd/platform/kube"
)

type fakeSecrets struct {
	pull  []kube.PullSecret
	named map[string][]byte
}

func (f fakeSecrets) PullSecrets(context.Context) ([]kube.PullSecret, error) { return f.pull, nil }

func (f fakeSecrets) NamedSecrets(_ context.Context, names []string) ([][]byte, error) {
	var out [][]byte
	for _, n := range names {
		out = append(out, f.named[n])
	}
	return out, nil
}

func config(user string) []byte {
	return []byte(`{"auths":{"r.example":{"username":"` + user + `","password":"pw"}}}`)
}

// Which credentials each repository gets: a namespace's pull secret only
// for its workloads' repositories; --registry-secret and
// --registry-credentials for every repository. (A slice built and then
// not passed on once made both flags do nothing.)
func TestRegistryKeychains(t *testing.T) {
	cluster := fakeSecrets{
		pull:  []kube.PullSecret{{Name: "a/pull", DockerConfig: config("team-a"), Images: []string{"r.example/team-a/app:1"}}},
		named: map[string][]byte{"ops/regcred": config("ops")},
	}
	credFile := filepath.Join(t.TempDir(), "registries.yaml")
	if err := os.WriteFile(credFile, []byte("registries:\n  r.example: {username: file, password: pw}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		secrets  []string
		credFile string
		want     map[string]string // repository → user; "" anonymous
	}{
		{"pull secrets only", nil, "", map[string]string{"r.example/team-a/app": "team-a", "r.example/team-b/app": ""}},
		{"--registry-secret", []string{"ops/regcred"}, "", map[string]string{"r.example/team-a/app": "team-a", "r.example/team-b/app": "ops"}},
		{"--registry-credentials", nil, credFile, map[string]string{"r.example/team-a/app": "team-a", "r.example/team-b/app": "file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kcs, err := registryKeychains(context.Background(), cluster, tc.secrets, tc.credFile)
			if err != nil {
				t.Fatal(err)
			}
			kc := authn.NewMultiKeychain(kcs...)
			for repo, want := range tc.want {
				r, _ := name.NewRepository(repo)
				a, err := kc.Resolve(r)
				if err != nil {
					t.Fatal(err)
				}
				got := ""
				if a != authn.Anonymous {
					cfg, err := a.Authorization()
					if err != nil {
						t.Fatal(err)
					}
					got = cfg.Username
				}
				if got != want {
					t.Errorf("%s: credentials of %q, want %q", repo, got, want)
				}
			}
		})
	}
	if _, err := registryKeychains(context.Background(), cluster, nil, filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing --registry-credentials file was accepted")
	}
}

// A malformed --registry-secret or --registry-credentials fails the
// start, naming what is wrong (and never quoting a password).
func TestMalformedRegistryCredentialsFailAtStart(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) string {
		p := filepath.Join(dir, strconv.Itoa(len(content))+".yaml")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cluster := fakeSecrets{named: map[string][]byte{
		"ops/notjson":  []byte(`{"auths": hunter2`),
		"ops/empty":    []byte(`{"auths":{}}`),
		"ops/badhost":  []byte(`{"auths":{"not a host/x":{"username":"u","password":"hunter2"}}}`),
		"ops/nocreds":  []byte(`{"auths":{"r.example":{}}}`),
		"ops/regcred":  config("ops"),
		"ops/badauth":  []byte(`{"auths":{"r.example":{"auth":"%%%hunter2"}}}`),
		"ops/dockerio": []byte(`{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"pw"}}}`),
	}}
	for _, tc := range []struct {
		name, credFile string
		secrets        []string
		want           string // "" accepted
	}{
		{"secret not JSON", "", []string{"ops/notjson"}, "--registry-secret ops/notjson"},
		{"secret without registries", "", []string{"ops/empty"}, "holds no registry credentials"},
		{"secret with a bad host", "", []string{"ops/badhost"}, `"not a host/x" is not a registry host`},
		{"secret without credentials", "", []string{"ops/nocreds"}, "registry r.example has no username"},
		{"secret with bad auth", "", []string{"ops/badauth"}, "--registry-secret ops/badauth"},
		{"a good secret", "", []string{"ops/regcred"}, ""},
		{"docker's own Hub key", "", []string{"ops/dockerio"}, ""},
		{"file with a bad host", file("registries:\n  'https://r.example/x y': {username: u, password: hunter2}\n"), nil, "is not a registry host"},
		{"file entry without credentials", file("registries:\n  r.example: {username: u}\n"), nil, "neither a username with a password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := registryKeychains(context.Background(), cluster, tc.secrets, tc.credFile)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Fatalf("the error quotes a secret: %v", err)
			}
		})
	}
}
