// Command image builds fluxd's OCI image without a container engine and
// pushes it to a registry ('make image'). It prints the pushed reference,
// with its digest, on stdout.
//
//	go run ./hack/image --fluxd bin/static/fluxd --fluxctl bin/static/fluxctl \
//	    --version v1.2.3 --revision $(git rev-parse HEAD) --image REGISTRY/fluxd:v1.2.3
//
// The image has no base: its layers hold the static binaries, a CA bundle and
// the passwd and group entries of the nonroot user (see README, "Container
// image"). The creation time, and every file's time, is SOURCE_DATE_EPOCH, so
// the same binaries give the same digest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	var (
		cfg   Config
		image string
	)
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&cfg.Fluxd, "fluxd", "bin/static/fluxd", "static fluxd binary, installed as "+fluxdPath)
	fs.StringVar(&cfg.Fluxctl, "fluxctl", "", "static fluxctl binary, installed as "+fluxctlPath+" (optional)")
	fs.StringVar(&cfg.CABundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of the CAs fluxd trusts, installed as "+caBundlePath)
	fs.StringVar(&cfg.Version, "version", "", "fluxd's version, for the org.opencontainers.image.version label")
	fs.StringVar(&cfg.Revision, "revision", "", "the git commit built, for the org.opencontainers.image.revision label")
	fs.StringVar(&cfg.Source, "source", defaultSource, "the source repository's URL, for the org.opencontainers.image.source label")
	fs.StringVar(&image, "image", os.Getenv("IMAGE"), "where to push, e.g. registry.example/fluxd:v1.2.3 (env IMAGE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	created, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	cfg.Created = created
	if image == "" {
		return errors.New("no --image (or IMAGE) to push to")
	}
	img, err := Build(cfg)
	if err != nil {
		return err
	}
	ref, err := Push(ctx, img, image)
	if err != nil {
		return err
	}
	fmt.Println(ref.String())
	return nil
}

// sourceDateEpoch parses SOURCE_DATE_EPOCH (seconds since 1970, see
// reproducible-builds.org); unset means the epoch itself.
func sourceDateEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("parsing SOURCE_DATE_EPOCH %q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}
