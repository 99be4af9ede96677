package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fluxd/fluxd/internal/fluxerr"
)

// pushPrivate pushes an image as repo:tag to a privateRegistry.
func pushPrivate(t *testing.T, host, repo, tag string) {
	t.Helper()
	ref, err := name.NewTag(host + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, imageAt(t, time.Now(), nil), remote.WithAuth(&authn.Basic{Username: "puller", Password: "pw"})); err != nil {
		t.Fatal(err)
	}
}

func dockerConfig(host, user, password string) []byte {
	return []byte(`{"auths":{"` + host + `":{"username":"` + user + `","password":"` + password + `"}}}`)
}

// A workload's pull secret serves the repositories of the images the
// workloads that use it run, and no other: a secret of namespace a is not
// offered for a repository only namespace b's workloads run, although it
// holds credentials for that registry.
func TestPullSecretsServeOnlyTheirWorkloadsRepositories(t *testing.T) {
	host := privateRegistry(t)
	pushPrivate(t, host, "team-a/app", "1.0")
	pushPrivate(t, host, "team-b/app", "1.0")
	src := func(context.Context) ([]Credentials, error) {
		return []Credentials{{
			Source:       "image pull secret a/pull",
			DockerConfig: dockerConfig(host, "puller", "pw"),
			Images:       []string{host + "/team-a/app:1.0", host + "/team-a/app@sha256:" + strings.Repeat("0", 64)},
		}}, nil
	}
	kc := NewSecretKeychain(src, time.Hour)

	for _, tc := range []struct {
		repo string
		anon bool
	}{
		{host + "/team-a/app", false},
		{host + "/team-b/app", true},
		{host + "/private", true},
	} {
		repo, _ := name.NewRepository(tc.repo)
		a, err := kc.Resolve(repo)
		if err != nil {
			t.Fatal(err)
		}
		if got := a == authn.Anonymous; got != tc.anon {
			t.Errorf("Resolve(%s): anonymous %v, want %v", tc.repo, got, tc.anon)
		}
	}

	c, err := New(Config{Keychains: []authn.Keychain{kc}})
	if err != nil {
		t.Fatal(err)
	}
	if imgs, err := c.Images(context.Background(), host+"/team-a/app"); err != nil || len(imgs) != 1 {
		t.Errorf("namespace a's repository with a's secret: %v, %v", imgs, err)
	}
	_, err = c.Images(context.Background(), host+"/team-b/app")
	if err == nil || !strings.Contains(err.Error(), "fluxd has no credentials") {
		t.Errorf("namespace b's repository: %v; want a refusal without credentials", err)
	}

	// The operator's credentials (--registry-secret) serve every
	// repository of their registry.
	global := NewSecretKeychain(func(context.Context) ([]Credentials, error) {
		return []Credentials{{Source: "--registry-secret ops/registry", DockerConfig: dockerConfig(host, "puller", "pw"), Global: true}}, nil
	}, time.Hour)
	c, err = New(Config{Keychains: []authn.Keychain{kc, global}})
	if err != nil {
		t.Fatal(err)
	}
	if imgs, err := c.Images(context.Background(), host+"/team-b/app"); err != nil || len(imgs) != 1 {
		t.Errorf("namespace b's repository with --registry-secret: %v, %v", imgs, err)
	}
}

// A registry that refuses credentials: the error names the registry and
// the source of the credentials fluxd offered, never the password.
func TestRefusedCredentialsNameTheirSource(t *testing.T) {
	host := privateRegistry(t)
	credFile := filepath.Join(t.TempDir(), "registries.yaml")
	if err := os.WriteFile(credFile, []byte("registries:\n  \""+host+"\": {username: puller, password: hunter2-wrong}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dockerCfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(dockerCfg, dockerConfig(host, "puller", "hunter2-wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := func(source string, global bool) authn.Keychain {
		return NewSecretKeychain(func(context.Context) ([]Credentials, error) {
			return []Credentials{{Source: source, DockerConfig: dockerConfig(host, "puller", "hunter2-wrong"), Global: global, Images: []string{host + "/private:1.0"}}}, nil
		}, time.Hour)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"registry secret", Config{Keychains: []authn.Keychain{secret("--registry-secret ops/regcred", true)}},
			"the registry " + host + " refused the credentials from --registry-secret ops/regcred for " + host + "/private"},
		{"pull secret", Config{Keychains: []authn.Keychain{secret("image pull secret default/pull", false)}},
			"the registry " + host + " refused the credentials from image pull secret default/pull"},
		{"credentials file", Config{Keychains: []authn.Keychain{NewSecretKeychain(CredentialsFile(credFile), time.Hour)}},
			"the registry " + host + " refused the credentials from --registry-credentials " + credFile},
		{"docker config", Config{DockerConfig: dockerCfg},
			"the registry " + host + " refused the credentials from --docker-config " + dockerCfg},
		{"none", Config{},
			"the registry " + host + " refused access to " + host + "/private, and fluxd has no credentials for it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DOCKER_CONFIG", t.TempDir()) // no developer's credentials
			c, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Images(context.Background(), host+"/private")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, tc.want)
			}
			var fe *fluxerr.Error
			if !errors.As(err, &fe) || fe.Kind != fluxerr.Unavailable || fe.Help == "" {
				t.Errorf("%#v; want an Unavailable error with help", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the password is in the message: %v", err)
			}
		})
	}
}

// A tenant who runs another namespace's image with a pull secret holding
// other credentials for that registry (sorted first) cannot keep that
// namespace from reading its repository: refused credentials are passed
// over, and the next source's are tried.
func TestRefusedPullSecretDoesNotShadowAnother(t *testing.T) {
	host := privateRegistry(t)
	pushPrivate(t, host, "team-b/app", "1.0")
	src := func(context.Context) ([]Credentials, error) {
		return []Credentials{
			{Source: "image pull secret a-team/pull", DockerConfig: dockerConfig(host, "puller", "wrong"), Images: []string{host + "/team-b/app:1.0"}},
			{Source: "image pull secret b-team/pull", DockerConfig: dockerConfig(host, "puller", "pw"), Images: []string{host + "/team-b/app:1.0"}},
		}, nil
	}
	c, err := New(Config{Keychains: []authn.Keychain{NewSecretKeychain(src, time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if imgs, err := c.Images(context.Background(), host+"/team-b/app"); err != nil || len(imgs) != 1 {
		t.Errorf("namespace b's repository behind a's wrong secret: %v, %v", imgs, err)
	}
}

func TestPullSecretCredentials(t *testing.T) {
	host := privateRegistry(t)
	reads := 0
	secret := []byte(`{"auths":{"` + host + `":{"username":"puller","password":"pw"}}}`)
	kc := NewSecretKeychain(func(context.Context) ([]Credentials, error) {
		reads++
		return []Credentials{
			{Source: "image pull secret default/broken", DockerConfig: []byte("not json"), Images: []string{host + "/private:1.0"}},
			{Source: "image pull secret default/private", DockerConfig: secret, Images: []string{host + "/private:1.0"}},
		}, nil
	}, time.Hour)

	anon, _ := New(Config{})
	if _, err := anon.Images(context.Background(), host+"/private"); err == nil || !strings.Contains(err.Error(), "fluxd has no credentials") {
		t.Fatalf("without the secret: %v", err)
	}
	c, err := New(Config{Keychains: []authn.Keychain{kc}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		imgs, err := c.Images(context.Background(), host+"/private")
		if err != nil || len(imgs) != 1 || imgs[0].Tag != "1.0" {
			t.Fatalf("with the pull secret: %v, %v", imgs, err)
		}
	}
	if reads != 1 {
		t.Errorf("the secrets were read %d times within the TTL, want 1", reads)
	}
}

// A secret created after fluxd read the secrets: the 401 makes fluxd read
// them again, once, before it reports an error.
func TestCredentialsAreReReadAfterA401(t *testing.T) {
	host := privateRegistry(t)
	var secrets []Credentials
	reads := 0
	kc := NewSecretKeychain(func(context.Context) ([]Credentials, error) { reads++; return secrets, nil }, time.Hour)
	c, err := New(Config{Keychains: []authn.Keychain{kc}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tags(context.Background(), host+"/private"); err == nil {
		t.Fatal("listed a private repository without credentials")
	}
	// The secret appears; the cached (empty) credentials are an hour old
	// at most, but the 401 makes fluxd look again.
	secrets = []Credentials{{Source: "--registry-secret default/new", Global: true, DockerConfig: []byte(`{"auths":{"` + host + `":{"username":"puller","password":"pw"}}}`)}}
	before := reads
	tags, err := c.Tags(context.Background(), host+"/private")
	if err != nil || len(tags) != 1 {
		t.Fatalf("after the secret appeared: %v, %v", tags, err)
	}
	if reads != before+1 {
		t.Errorf("secrets read %d more times, want once", reads-before)
	}
}
