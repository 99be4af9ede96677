package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newListImagesCommand(g *globals) *cobra.Command {
	var limit, offset int
	var digests bool
	cmd := &cobra.Command{
		Use:   "list-images SERVICE",
		Short: "List the images available to each container of a service, newest first",
		Long: `list-images shows, for each container of SERVICE, the tags of its image
repository, newest first (images without a creation time last). '->' marks
the running tag and '*' the ones its policy ranks higher; tags the
container's tag filter does not pass are marked "filtered out", and a filter
that passes nothing is reported as a warning. --digests adds each image's
manifest digest (what a pinned container, fluxd.io/pin-digest, runs).
Where a signature verification profile applies (fluxd --verify-config, or
the workload's fluxd.io/verify annotation), a VERIFIED column says of each
image shown: verified (by which signer), unsigned, failed: why, or "-"
where none applies; only the images shown are verified.
SERVICE is namespace:kind/name, or namespace/name or name where unambiguous.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(g.output); err != nil {
				return err
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runListImages(ctx, cmd.OutOrStdout(), c, args[0], offset, limit, g.output, digests)
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 10, "show at most this many tags per container (0: all)")
	cmd.Flags().IntVar(&offset, "offset", 0, "skip this many tags per container first (to page through big repositories)")
	cmd.Flags().BoolVar(&digests, "digests", false, "show each image's manifest digest")
	addOutputFlag(cmd, g)
	return cmd
}

type imageJSON struct {
	Tag       string     `json:"tag"`
	Ref       string     `json:"ref"`
	Digest    string     `json:"digest"`
	CreatedAt *time.Time `json:"createdAt,omitempty"`
	Running   bool       `json:"running,omitempty"`
	Newer     bool       `json:"newer,omitempty"`
	// Filtered is true for a tag the container's filter does not pass.
	Filtered bool `json:"filtered,omitempty"`
	// Undated is true for an image without a creation time.
	Undated bool `json:"undated,omitempty"`
	// Reading is true while its digest and creation time are being read.
	Reading bool `json:"reading,omitempty"`
	// Verification is what checking its signatures found, where a
	// verification profile applies to it (absent where none does).
	Verification *verificationJSON `json:"verification,omitempty"`
}

type verificationJSON struct {
	// Outcome is verified, unsigned, failed, error or unchecked (its
	// digest not read yet, or past what one call verifies).
	Outcome  string   `json:"outcome"`
	Profiles []string `json:"profiles,omitempty"`
	Digest   string   `json:"digest,omitempty"`
	Detail   string   `json:"detail,omitempty"`
}

type containerImagesJSON struct {
	Service   string `json:"service"`
	Container string `json:"container"`
	Current   string `json:"current"`
	Error     string `json:"error,omitempty"`
	Total     int    `json:"total"`
	// Refreshing: the images are the cached ones, a refresh is running;
	// RefreshError: the last refresh failed, the images are cached ones.
	Refreshing   bool       `json:"refreshing,omitempty"`
	RefreshError string     `json:"refreshError,omitempty"`
	RefreshedAt  *time.Time `json:"refreshedAt,omitempty"`
	// TimesRead counts the images (of Total) whose creation time is read.
	TimesRead int         `json:"timesRead"`
	Filter    string      `json:"filter,omitempty"`
	Best      string      `json:"best,omitempty"`
	Warnings  []string    `json:"warnings,omitempty"`
	Images    []imageJSON `json:"images"`
}

func runListImages(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, service string, offset, limit int, output string, digests bool) error {
	resp, err := c.ListImages(ctx, &fluxdv1.ListImagesRequest{Service: service, Limit: int32(max(limit, 0)), Offset: int32(max(offset, 0))})
	if err != nil {
		return err
	}
	var rows []containerImagesJSON
	verified := false // some image shown has a verification
	for _, s := range resp.GetServices() {
		for _, ci := range s.GetContainers() {
			row := containerImagesJSON{Service: s.GetService(), Container: ci.GetContainer(), Current: ci.GetCurrent(), Error: ci.GetError(),
				Filter: ci.GetFilter(), Best: ci.GetBest(), Warnings: ci.GetWarnings(), Images: []imageJSON{},
				Total: int(ci.GetTotal()), Refreshing: ci.GetRefreshing(), RefreshError: ci.GetRefreshError(), TimesRead: int(ci.GetTimesRead())}
			if ci.GetRefreshedAt() != nil {
				t := ci.GetRefreshedAt().AsTime()
				row.RefreshedAt = &t
			}
			// Images come newest first; with a filter, the daemon ranks
			// the passing tags: those ranked above the running one are
			// newer under the policy.
			rank := map[string]int{}
			for i, t := range ci.GetPassing() {
				rank[t] = i + 1
			}
			// A pinned image (repo:tag@digest) runs its tag.
			current, runDigest, _ := strings.Cut(ci.GetCurrent(), "@")
			running := -1
			for i, img := range ci.GetAvailable() {
				if img.GetRef() == current {
					running = i
				}
			}
			if running >= 0 && runDigest != "" {
				if d := ci.GetAvailable()[running].GetDigest(); d != "" && d != runDigest {
					row.Warnings = append(row.Warnings, fmt.Sprintf("runs %s pinned at %s; the tag has moved to %s since", current, runDigest, d))
				}
			}
			runTag := ""
			if running >= 0 {
				runTag = ci.GetAvailable()[running].GetTag()
			}
			policied := ci.GetFilter() != ""
			for i, img := range ci.GetAvailable() {
				ij := imageJSON{Tag: img.GetTag(), Ref: img.GetRef(), Digest: img.GetDigest(), Running: i == running,
					Undated: img.GetCreatedAt() == nil && !img.GetReading(), Reading: img.GetReading()}
				switch {
				case !policied:
					// Without a filter the planner takes an image only
					// when it was built later than the running one: a tag
					// copied from the running image (crane copy) sorts
					// above it but is not newer.
					ij.Newer = running >= 0 && i < running && builtLater(img, ci.GetAvailable()[running])
				case rank[img.GetTag()] == 0:
					ij.Filtered = true
				default:
					ij.Newer = i != running && (rank[runTag] == 0 || rank[img.GetTag()] < rank[runTag])
				}
				if img.GetCreatedAt() != nil {
					t := img.GetCreatedAt().AsTime()
					ij.CreatedAt = &t
				}
				if v := img.GetVerification(); v != nil {
					ij.Verification = &verificationJSON{Outcome: v.GetOutcome(), Profiles: v.GetProfiles(), Digest: v.GetDigest(), Detail: v.GetDetail()}
					verified = true
				}
				row.Images = append(row.Images, ij)
			}
			rows = append(rows, row)
		}
	}
	if output != "table" {
		return writeData(w, output, rows)
	}
	// Notes on a container (warnings, a refresh under way, paging) go
	// below the table, so that a long one does not widen the IMAGE column.
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	header := "SERVICE\tCONTAINER\tIMAGE\tCREATED"
	if digests {
		header += "\tDIGEST"
	}
	if verified {
		header += "\tVERIFIED"
	}
	fmt.Fprintln(tw, header)
	var notes []string
	marked := false
	for _, r := range rows {
		repo, _, _ := strings.Cut(r.Current, "@")
		if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
			repo = repo[:i]
		}
		head := repo
		if r.Filter != "" && r.Filter != "*" {
			head += "  (filter " + r.Filter + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", r.Service, r.Container, head)
		note := func(format string, a ...any) {
			notes = append(notes, r.Service+" "+r.Container+": "+fmt.Sprintf(format, a...))
		}
		for _, w := range r.Warnings {
			note("warning: %s", w)
		}
		since := ""
		if r.RefreshedAt != nil {
			since = ", as of " + r.RefreshedAt.UTC().Format("2006-01-02 15:04:05")
		}
		switch {
		case r.Refreshing && r.TimesRead < r.Total:
			note("fetching creation times, %d of %d read", r.TimesRead, r.Total)
		case r.Refreshing:
			note("a refresh of this repository is still running; showing the %d cached images%s", r.Total, since)
		case r.RefreshError != "":
			note("the last refresh failed: %s; showing the %d cached images%s", r.RefreshError, r.Total, since)
		}
		if r.Error != "" {
			fmt.Fprintf(tw, "\t\t   (cannot list images; see below)\t\n")
			note("cannot list images: %s", r.Error)
			continue
		}
		shown := r.Images
		if limit > 0 && len(shown) > limit {
			shown = shown[:limit]
		}
		for _, img := range shown {
			mark := ""
			switch {
			case img.Running:
				mark = "->"
			case img.Newer:
				mark = "*"
			}
			marked = marked || mark != ""
			created := "no creation time"
			if img.Reading {
				created = "(fetching)"
			}
			if img.CreatedAt != nil {
				created = img.CreatedAt.UTC().Format("2006-01-02 15:04:05")
			}
			if img.Filtered {
				created += "  (filtered out)"
			}
			line := fmt.Sprintf("\t\t%-2s %s\t%s", mark, img.Tag, created)
			if digests {
				digest := img.Digest
				if digest == "" {
					digest = "-"
				}
				line += "\t" + digest
			}
			if verified {
				line += "\t" + verifiedCell(img.Verification)
			}
			fmt.Fprintln(tw, line)
		}
		if left := max(r.Total, len(r.Images)) - offset - len(shown); left > 0 {
			tags := "tags"
			if left == 1 {
				tags = "tag"
			}
			note("%d more %s; --offset %d for the next page, --limit 0 for all", left, tags, offset+len(shown))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if marked {
		fmt.Fprintln(w, "\n-> runs now   * newer under the container's policy")
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	return nil
}

// verifiedCell is an image's VERIFIED column: verified (by whom),
// unsigned, failed: why; "-" where no verification profile applies.
// Detail is the daemon's "profile P: verified by S; profile Q: ...".
func verifiedCell(v *verificationJSON) string {
	if v == nil || v.Outcome == "not-required" {
		return "-"
	}
	parts := profileDetails(v.Detail)
	switch v.Outcome {
	case "verified":
		for i, p := range parts {
			if _, by, ok := strings.Cut(p, ": verified by "); ok {
				parts[i] = by
			}
		}
		return "verified (" + strings.Join(parts, "; ") + ")"
	case "unsigned":
		return "unsigned"
	case "failed":
		// From the profile that failed (the verdict stops at it) to the
		// end: its detail may hold "; " (a missing attestation's does).
		why := parts[len(parts)-1]
		if _, after, ok := strings.Cut(v.Detail, ": failed "); ok {
			why = after
			if reason, rest, ok := strings.Cut(strings.TrimPrefix(why, "("), "): "); ok {
				why = reason + ": " + rest
			}
		}
		return "failed: " + why
	}
	if v.Detail == "" {
		return v.Outcome
	}
	return v.Outcome + ": " + v.Detail
}

// profileDetails splits a verification's detail into its profiles'
// ("profile P: ...; profile Q: ...", verify.Verdict.String). A profile's
// own detail may hold "; " too (an attestation looked for "in tag T and
// the referrers; it has none"), so it splits only before "profile ".
func profileDetails(detail string) []string {
	parts := strings.Split(detail, "; profile ")
	for i := 1; i < len(parts); i++ {
		parts[i] = "profile " + parts[i]
	}
	return parts
}

// builtLater says img was built after run, or that either's build time
// is not known (then the listing's order says).
func builtLater(img, run *fluxdv1.ImageInfo) bool {
	if img.GetCreatedAt() == nil || run.GetCreatedAt() == nil {
		return true
	}
	return img.GetCreatedAt().AsTime().After(run.GetCreatedAt().AsTime())
}
