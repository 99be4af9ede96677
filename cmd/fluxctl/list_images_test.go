package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// imagesClient answers ListImages from memory.
type imagesClient struct {
	fluxdv1.FluxServiceClient
	resp *fluxdv1.ListImagesResponse
}

func (c imagesClient) ListImages(context.Context, *fluxdv1.ListImagesRequest, ...grpc.CallOption) (*fluxdv1.ListImagesResponse, error) {
	return c.resp, nil
}

// A big repository's first listing under build-time order: the images
// read so far, the ones being read, and how far the reading is.
func TestListImagesWhileCreationTimesAreFetched(t *testing.T) {
	at := func(h int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2026, 3, 1, h, 0, 0, 0, time.UTC))
	}
	c := imagesClient{resp: &fluxdv1.ListImagesResponse{Services: []*fluxdv1.ServiceImages{{
		Service: "default:deployment/app",
		Containers: []*fluxdv1.ContainerImages{{
			Container: "app", Current: "reg/app:main-aaa", Filter: "glob:main-*", Total: 10000, TimesRead: 2, Refreshing: true,
			Warnings: []string{"9998 of the images passing glob:main-* are still being read; the order by build time, and the newest, are known once they are"},
			Passing:  []string{"main-bbb", "main-aaa", "main-zzz"},
			Available: []*fluxdv1.ImageInfo{
				{Ref: "reg/app:main-bbb", Tag: "main-bbb", Digest: "sha256:b", CreatedAt: at(2)},
				{Ref: "reg/app:main-aaa", Tag: "main-aaa", Digest: "sha256:a", CreatedAt: at(1)},
				{Ref: "reg/app:main-zzz", Tag: "main-zzz", Reading: true},
			},
		}},
	}}}}
	for _, o := range []string{"table", "json"} {
		t.Run(o, func(t *testing.T) {
			var buf bytes.Buffer
			if err := runListImages(context.Background(), &buf, c, "app", 0, 3, o, false); err != nil {
				t.Fatal(err)
			}
			golden(t, "list-images-fetching."+o, buf.Bytes())
		})
	}
}

// A pinned container (repo:tag@digest) runs its tag: --digests shows
// every image's digest, and a tag that moved since it was pinned is
// said below the table.
func TestListImagesDigests(t *testing.T) {
	at := func(h int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2026, 3, 1, h, 0, 0, 0, time.UTC))
	}
	old := "sha256:" + strings.Repeat("a", 64)
	moved := "sha256:" + strings.Repeat("b", 64)
	c := imagesClient{resp: &fluxdv1.ListImagesResponse{Services: []*fluxdv1.ServiceImages{{
		Service: "default:deployment/app",
		Containers: []*fluxdv1.ContainerImages{{
			Container: "app", Current: "reg/app:latest@" + old, Total: 2, TimesRead: 2,
			Available: []*fluxdv1.ImageInfo{
				{Ref: "reg/app:latest", Tag: "latest", Digest: moved, CreatedAt: at(2)},
				{Ref: "reg/app:1.0.0", Tag: "1.0.0", Digest: old, CreatedAt: at(1)},
			},
		}},
	}}}}
	for _, o := range []string{"table", "json"} {
		t.Run(o, func(t *testing.T) {
			var buf bytes.Buffer
			if err := runListImages(context.Background(), &buf, c, "app", 0, 10, o, true); err != nil {
				t.Fatal(err)
			}
			golden(t, "list-images-digests."+o, buf.Bytes())
		})
	}
}

// Without a filter, a tag copied from the running image (the same build
// time, sorted above it by name) is not marked newer: the planner does
// not take it. A later build is.
func TestListImagesCopiedTagIsNotNewer(t *testing.T) {
	at := func(d int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC))
	}
	c := imagesClient{resp: &fluxdv1.ListImagesResponse{Services: []*fluxdv1.ServiceImages{{
		Service: "default:deployment/helloworld",
		Containers: []*fluxdv1.ContainerImages{{
			Container: "app", Current: "reg/helloworld:1.2.0", Total: 3, TimesRead: 3,
			Available: []*fluxdv1.ImageInfo{
				{Ref: "reg/helloworld:1.4.0", Tag: "1.4.0", CreatedAt: at(5)},
				{Ref: "reg/helloworld:1.3.0", Tag: "1.3.0", CreatedAt: at(3)},
				{Ref: "reg/helloworld:1.2.0", Tag: "1.2.0", CreatedAt: at(3)},
			},
		}},
	}}}}
	var buf bytes.Buffer
	if err := runListImages(context.Background(), &buf, c, "helloworld", 0, 10, "json", false); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	newer := func(tag string) bool {
		i := strings.Index(out, `"tag": "`+tag+`"`)
		if i < 0 {
			t.Fatalf("no %s in %s", tag, out)
		}
		end := strings.Index(out[i:], "}")
		return strings.Contains(out[i:i+end], `"newer": true`)
	}
	if !newer("1.4.0") || newer("1.3.0") || newer("1.2.0") {
		t.Errorf("want only 1.4.0 newer (1.3.0 is a copy of the running 1.2.0):\n%s", out)
	}
}

// Where a verification profile applies, a VERIFIED column says each
// image's verification: by whom, unsigned, failed and why, or "-" where
// none applies (another container's repository).
func TestListImagesVerification(t *testing.T) {
	at := func(h int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2026, 3, 1, h, 0, 0, 0, time.UTC))
	}
	c := imagesClient{resp: &fluxdv1.ListImagesResponse{Services: []*fluxdv1.ServiceImages{{
		Service: "default:deployment/app",
		Containers: []*fluxdv1.ContainerImages{{
			Container: "app", Current: "reg/app:1.0.0", Filter: "semver:*", Total: 4, TimesRead: 3,
			Passing: []string{"1.2.0", "1.1.0", "1.0.1", "1.0.0"},
			Available: []*fluxdv1.ImageInfo{
				{Ref: "reg/app:1.2.0", Tag: "1.2.0", Digest: "sha256:c", CreatedAt: at(3), Verification: &fluxdv1.Verification{
					Outcome: "failed", Profiles: []string{"ci"}, Digest: "sha256:c",
					Detail: `profile ci: failed (wrong-key): 1 signature(s), none by the key(s) of profile "ci"`}},
				{Ref: "reg/app:1.1.0", Tag: "1.1.0", Digest: "sha256:b", CreatedAt: at(2), Verification: &fluxdv1.Verification{
					Outcome: "unsigned", Profiles: []string{"ci"}, Digest: "sha256:b", Detail: "profile ci: unsigned: no cosign signature for sha256:b"}},
				{Ref: "reg/app:1.0.1", Tag: "1.0.1", Reading: true, Verification: &fluxdv1.Verification{
					Outcome: "unchecked", Profiles: []string{"ci"}, Detail: "its digest is not read yet"}},
				{Ref: "reg/app:1.0.0", Tag: "1.0.0", Digest: "sha256:a", CreatedAt: at(1), Verification: &fluxdv1.Verification{
					Outcome: "verified", Profiles: []string{"ci"}, Digest: "sha256:a", Detail: "profile ci: verified by key sha256:k1 (ci.pub)"}},
			},
		}, {
			Container: "sidecar", Current: "reg/proxy:2.0", Total: 1, TimesRead: 1,
			Available: []*fluxdv1.ImageInfo{{Ref: "reg/proxy:2.0", Tag: "2.0", Digest: "sha256:p", CreatedAt: at(1)}},
		}},
	}}}}
	for _, o := range []string{"table", "json"} {
		t.Run(o, func(t *testing.T) {
			var buf bytes.Buffer
			if err := runListImages(context.Background(), &buf, c, "app", 0, 10, o, false); err != nil {
				t.Fatal(err)
			}
			golden(t, "list-images-verified."+o, buf.Bytes())
		})
	}
}

// TestVerifiedCellNamesTheFailingProfile: with two profiles, one verified
// and one failed with a detail that holds "; " itself (a missing
// attestation), the VERIFIED column says why the failing one failed, not
// the tail of its detail ("failed: it has none)", as it did).
func TestVerifiedCellNamesTheFailingProfile(t *testing.T) {
	v := &verificationJSON{Outcome: "failed", Detail: `profile signed: verified by key sha256:k1 (cosign.pub); ` +
		`profile sbom: failed (missing-attestation): signed by key sha256:k1 (cosign.pub), but no attestation of predicate type https://spdx.dev/Document for sha256:a (looked in tag sha256-a.att and the referrers; it has none)`}
	got := verifiedCell(v)
	want := `failed: missing-attestation: signed by key sha256:k1 (cosign.pub), but no attestation of predicate type https://spdx.dev/Document for sha256:a (looked in tag sha256-a.att and the referrers; it has none)`
	if got != want {
		t.Errorf("verifiedCell:\n got %q\nwant %q", got, want)
	}
	v = &verificationJSON{Outcome: "verified", Detail: "profile a: verified by key sha256:k1 (a.pub); profile b: verified by key sha256:k2 (b.pub)"}
	if got, want := verifiedCell(v), "verified (key sha256:k1 (a.pub); key sha256:k2 (b.pub))"; got != want {
		t.Errorf("verifiedCell of two verified profiles: got %q, want %q", got, want)
	}
}

// A failed image's VERIFIED cell names the reason and its detail from the
// profile that failed, even when the detail holds "; " itself (a missing
// attestation's says what was looked at; what the image has).
func TestVerifiedCellFailedDetailWithSemicolons(t *testing.T) {
	detail := "no attestation of predicate type https://spdx.dev/Document for sha256:cc (looked in tag sha256-cc.att and the referrers; it has none)"
	v := &verificationJSON{Outcome: "failed", Detail: "profile signed: verified by key k (a.pub); profile sbom: failed (missing-attestation): " + detail}
	if got, want := verifiedCell(v), "failed: missing-attestation: "+detail; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
