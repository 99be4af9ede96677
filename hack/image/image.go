package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where things are in the image, and who runs it.
const (
	fluxdPath    = "/usr/local/bin/fluxd"
	fluxctlPath  = "/usr/local/bin/fluxctl"
	caBundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// stateDir is fluxd's default --state-dir: the one place it writes, and
	// so a volume when the root filesystem is read-only.
	stateDir = "/var/lib/fluxd"
	homeDir  = "/home/nonroot"
	// uid and gid are distroless's "nonroot", so policies written for
	// those images (runAsUser: 65532) fit this one.
	uid = 65532
	gid = 65532

	defaultSource = "https://github.com/fluxd/fluxd"
)

// Config says what goes into the image.
type Config struct {
	// Fluxd is the path of a statically linked fluxd; required.
	Fluxd string
	// Fluxctl is the path of a statically linked fluxctl; empty leaves it out.
	Fluxctl string
	// CABundle is the path of the PEM bundle copied to caBundlePath; required.
	CABundle string
	// Version, Revision and Source become the OCI labels; Version is required.
	Version, Revision, Source string
	// Created is the image's creation time and every file's modification
	// time: a fixed value (SOURCE_DATE_EPOCH) makes the digest reproducible.
	Created time.Time
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Fluxd == "" {
		errs = append(errs, errors.New("no fluxd binary given"))
	}
	if c.CABundle == "" {
		errs = append(errs, errors.New("no CA bundle given"))
	}
	if c.Version == "" {
		errs = append(errs, errors.New("no version given"))
	}
	return errors.Join(errs...)
}

// Build assembles the image: one layer of files that change rarely (users,
// CA bundle, directories) under one of the binaries, on no base image.
func Build(c Config) (v1.Image, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	arch, err := staticArch(c.Fluxd)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(c.CABundle)
	if err != nil {
		return nil, fmt.Errorf("reading CA bundle: %w", err)
	}
	base := []file{
		{path: "etc/", mode: 0o755},
		{path: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", uid, gid, homeDir))},
		{path: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", gid))},
		{path: "etc/ssl/", mode: 0o755},
		{path: "etc/ssl/certs/", mode: 0o755},
		{path: strings.TrimPrefix(caBundlePath, "/"), mode: 0o644, data: ca},
		{path: "home/", mode: 0o755},
		{path: strings.TrimPrefix(homeDir, "/") + "/", mode: 0o700, owned: true},
		{path: "var/", mode: 0o755},
		{path: "var/lib/", mode: 0o755},
		{path: strings.TrimPrefix(stateDir, "/") + "/", mode: 0o700, owned: true},
	}
	bins := []file{
		{path: "usr/", mode: 0o755},
		{path: "usr/local/", mode: 0o755},
		{path: "usr/local/bin/", mode: 0o755},
		{path: strings.TrimPrefix(fluxdPath, "/"), mode: 0o755, src: c.Fluxd},
	}
	if c.Fluxctl != "" {
		if _, err := staticArch(c.Fluxctl); err != nil {
			return nil, err
		}
		bins = append(bins, file{path: strings.TrimPrefix(fluxctlPath, "/"), mode: 0o755, src: c.Fluxctl})
	}
	var layers []v1.Layer
	for _, files := range [][]file{base, bins} {
		l, err := layer(files, c.Created)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, fmt.Errorf("adding layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: c.Created}
	cf.Author = ""
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, gid),
		Entrypoint: []string{fluxdPath},
		WorkingDir: stateDir,
		Env:        []string{"PATH=/usr/local/bin", "HOME=" + homeDir},
		Volumes:    map[string]struct{}{stateDir: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "fluxd",
			"org.opencontainers.image.version":  c.Version,
			"org.opencontainers.image.revision": c.Revision,
			"org.opencontainers.image.source":   c.Source,
			"org.opencontainers.image.created":  c.Created.Format(time.RFC3339),
		},
	}
	if c.Revision == "" {
		delete(cf.Config.Labels, "org.opencontainers.image.revision")
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting image config: %w", err)
	}
	return img, nil
}

// Push writes img to ref and returns the reference by digest. A registry on
// loopback is spoken to in plain HTTP (the local stack's is); any other with
// TLS and the credentials of the Docker config (docker login, crane auth login).
func Push(ctx context.Context, img v1.Image, ref string) (name.Digest, error) {
	var opts []name.Option
	if isLoopback(ref) {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.ParseReference(ref, opts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("parsing image reference %q: %w", ref, err)
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", tag, err)
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return tag.Context().Digest(d.String()), nil
}

// isLoopback tells whether ref's registry is on this machine.
func isLoopback(ref string) bool {
	host, _, _ := strings.Cut(ref, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// staticArch returns the GOARCH of the ELF executable at path, refusing one
// that needs a dynamic loader: the image has none.
func staticArch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading executable %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is dynamically linked, and the image has no C library: build it static ('make image' does)", path)
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	default:
		return "", fmt.Errorf("%s is for machine %s, which the image does not know", path, f.Machine)
	}
}

// file is one entry of a layer: a directory (path ending in "/"), data, or
// the contents of src.
type file struct {
	path  string
	mode  int64
	data  []byte
	src   string
	owned bool // owned by uid:gid rather than root
}

// layer writes files into an uncompressed tar, every entry dated t so the
// layer's digest depends only on contents.
func layer(files []file, t time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, ModTime: t, Format: tar.FormatPAX}
		if f.owned {
			h.Uid, h.Gid = uid, gid
		}
		data := f.data
		if f.src != "" {
			var err error
			if data, err = os.ReadFile(f.src); err != nil {
				return nil, fmt.Errorf("reading %s: %w", f.src, err)
			}
		}
		if strings.HasSuffix(f.path, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing layer entry %s: %w", f.path, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("writing layer entry %s: %w", f.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
