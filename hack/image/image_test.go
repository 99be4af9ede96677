package main

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestImage builds an image around a small static stand-in for fluxd, pushes
// it to an in-process registry, pulls it back and runs the binary out of its
// layer. TestMakeImage does the same with the real fluxd through 'make image'.
func TestImage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fluxd")
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"stand-in\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", bin, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in: %v\n%s", err, out)
	}
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cfg := Config{Fluxd: bin, CABundle: "testdata/ca.pem", Version: "v1.2.3", Revision: "0123abc", Source: defaultSource, Created: created}

	img, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same inputs differ: %s, %s", d1, d2)
	}

	host := serveRegistry(t)
	ref, err := Push(ctx, img, host+"/fluxd:v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if want := host + "/fluxd@" + d1.String(); ref.String() != want {
		t.Errorf("Push returned %s, want %s", ref, want)
	}
	pulled := pull(t, host+"/fluxd:v1.2.3")
	if d, _ := pulled.Digest(); d != d1 {
		t.Errorf("pulled digest %s, pushed %s", d, d1)
	}
	cf := checkConfig(t, pulled, "v1.2.3")
	if got := cf.Config.Labels["org.opencontainers.image.revision"]; got != "0123abc" {
		t.Errorf("revision label = %q, want 0123abc", got)
	}
	if !cf.Created.Time.Equal(created) {
		t.Errorf("created = %s, want %s", cf.Created.Time, created)
	}
	files := extract(t, pulled)
	ca, _ := os.ReadFile("testdata/ca.pem")
	if !bytes.Equal(files[caBundlePath].data, ca) {
		t.Errorf("%s is not the CA bundle given", caBundlePath)
	}
	if out := runFrom(t, files, fluxdPath); out != "stand-in" {
		t.Errorf("the binary in the image printed %q, want stand-in", out)
	}

	t.Run("refuses a dynamic binary", func(t *testing.T) {
		dyn := "/bin/true"
		if _, err := staticArch(dyn); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
			t.Skipf("%s is not a dynamic executable here (err %v)", dyn, err)
		}
		c := cfg
		c.Fluxd = dyn
		if _, err := Build(c); err == nil || !strings.Contains(err.Error(), "build it static") {
			t.Errorf("Build with a dynamic fluxd: err = %v, want one saying to build it static", err)
		}
	})
}

// TestMakeImage runs 'make image' as a person would, into an in-process
// registry, and runs 'fluxd version' from the pushed image. It builds fluxd
// statically with cgo (a minute or more when the build cache is cold).
func TestMakeImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fluxd statically: not in -short")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	host := serveRegistry(t)
	const version = "v0.0.0-imagetest"
	image := host + "/fluxd:" + version
	cmd := exec.Command("make", "--no-print-directory", "image", "IMAGE="+image, "VERSION="+version, "STATIC_DIR="+t.TempDir())
	cmd.Dir = filepath.Join("..", "..")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("make image: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	printed := lines[len(lines)-1]
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(host) + `/fluxd@sha256:[0-9a-f]{64}$`).MatchString(printed) {
		t.Fatalf("make image printed %q last; want the reference by digest", printed)
	}

	img := pull(t, image)
	if d, _ := img.Digest(); host+"/fluxd@"+d.String() != printed {
		t.Errorf("the tag is %s, make image printed %s", d, printed)
	}
	cf := checkConfig(t, img, version)
	if cf.Config.Labels["org.opencontainers.image.revision"] == "" {
		t.Error("no revision label")
	}
	files := extract(t, img)
	for _, p := range []string{fluxdPath, fluxctlPath} {
		if _, err := staticArch(files[p].path); err != nil {
			t.Errorf("%s in the image: %v", p, err)
		}
	}
	if out := runFrom(t, files, fluxdPath, "version"); out != version {
		t.Errorf("fluxd version from the image printed %q, want %q", out, version)
	}
}

// checkConfig asserts what every fluxd image's config must say.
func checkConfig(t *testing.T, img v1.Image, version string) *v1.ConfigFile {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform = %s/%s, want linux/<arch>", cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user = %q, want 65532:65532", cf.Config.User)
	}
	if diff := cmp.Diff([]string{fluxdPath}, cf.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  defaultSource,
	} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if _, ok := cf.Config.Volumes[stateDir]; !ok {
		t.Errorf("volumes = %v, want %s", cf.Config.Volumes, stateDir)
	}
	return cf
}

// serveRegistry starts an in-process registry and returns its host:port.
func serveRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func pull(t *testing.T, ref string) v1.Image {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	return img
}

type entry struct {
	hdr  *tar.Header
	data []byte
	path string // the regular file's contents, written out to a temp dir
}

// extract reads the image's flattened filesystem, writing each regular file
// to a temp dir, and checks who owns what: root owns everything but the
// nonroot user's home and the state directory.
func extract(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	dir := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]entry{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimSuffix(h.Name, "/")
		e := entry{hdr: h}
		if h.Typeflag == tar.TypeReg {
			if e.data, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
			e.path = filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", "_"))
			if err := os.WriteFile(e.path, e.data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		files[p] = e
	}
	for p, e := range files {
		wantOwner := 0
		if p == stateDir || p == homeDir {
			wantOwner = uid
		}
		if e.hdr.Uid != wantOwner || e.hdr.Gid != wantOwner {
			t.Errorf("%s is owned by %d:%d, want %d:%d", p, e.hdr.Uid, e.hdr.Gid, wantOwner, wantOwner)
		}
	}
	for _, p := range []string{fluxdPath, caBundlePath, "/etc/passwd", "/etc/group"} {
		if e, ok := files[p]; !ok || len(e.data) == 0 {
			t.Errorf("%s is missing or empty in the image", p)
		}
	}
	if e := files[fluxdPath]; e.hdr != nil && e.hdr.Mode&0o111 == 0 {
		t.Errorf("%s has mode %o, not executable", fluxdPath, e.hdr.Mode)
	}
	if !strings.Contains(string(files["/etc/passwd"].data), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", files["/etc/passwd"].data)
	}
	if !strings.Contains(string(files["/etc/group"].data), "nonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot group 65532:\n%s", files["/etc/group"].data)
	}
	return files
}

// runFrom runs the image's file at p with args and returns its trimmed output.
func runFrom(t *testing.T, files map[string]entry, p string, args ...string) string {
	t.Helper()
	out, err := exec.Command(files[p].path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("running %s from the image: %v\n%s", p, err, out)
	}
	return strings.TrimSpace(string(out))
}
