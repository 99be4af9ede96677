package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newBundlesCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundles [PIPELINE]",
		Short: "List a pipeline's bundles: their images, and their state in every stage",
		Long: `bundles lists the bundles of a promotion pipeline, newest first: the images
(repository, tag and digest) a stage's services ran once a release of them
rolled out, named by a short ID of their content, with the bundle's state in
each stage it reached (verifying, soaking, verified, failed, awaiting
approval, promoted, superseded).

PIPELINE may be left out when fluxd reads one pipeline (that your token may
see). A token scoped to some namespaces sees only the bundles that reached a
stage whose services are all in its scope, and their state in those stages.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(g.output); err != nil {
				return err
			}
			pipeline := ""
			if len(args) == 1 {
				pipeline = args[0]
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runBundles(ctx, cmd.OutOrStdout(), c, pipeline, g.output, time.Now())
			})
		},
	}
	addOutputFlag(cmd, g)
	return cmd
}

// bundlesJSON is the stable JSON shape of fluxctl bundles.
type bundlesJSON struct {
	Pipeline string       `json:"pipeline"`
	Bundles  []bundleJSON `json:"bundles"`
}

type bundleJSON struct {
	ID      string            `json:"id"`
	Created *time.Time        `json:"created,omitempty"`
	Stage   string            `json:"stage,omitempty"`
	Images  []bundleImageJSON `json:"images"`
	Stages  []recordJSON      `json:"stages"`
}

type bundleImageJSON struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	Digest     string `json:"digest"`
}

func runBundles(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, pipeline, output string, now time.Time) error {
	resp, err := c.ListBundles(ctx, &fluxdv1.ListBundlesRequest{Pipeline: pipeline})
	if err != nil {
		return err
	}
	// Newest first, whatever order fluxd sends (it sends newest first;
	// an older fluxd sent oldest first).
	bundles := slices.Clone(resp.GetBundles())
	slices.SortStableFunc(bundles, func(a, b *fluxdv1.BundleStatus) int {
		return b.GetCreated().AsTime().Compare(a.GetCreated().AsTime())
	})
	if output != "table" {
		out := bundlesJSON{Pipeline: resp.GetPipeline(), Bundles: []bundleJSON{}}
		for _, b := range bundles {
			bj := bundleJSON{ID: b.GetId(), Created: timeOf(b.GetCreated()), Stage: b.GetStage(), Images: []bundleImageJSON{}, Stages: []recordJSON{}}
			for _, img := range b.GetImages() {
				bj.Images = append(bj.Images, bundleImageJSON{Repository: img.GetRepository(), Tag: img.GetTag(), Digest: img.GetDigest()})
			}
			for _, r := range b.GetRecords() {
				bj.Stages = append(bj.Stages, recordFromProto(r))
			}
			out.Bundles = append(out.Bundles, bj)
		}
		return writeData(w, output, out)
	}
	if len(bundles) == 0 {
		_, err := fmt.Fprintf(w, "Pipeline %s has no bundle yet: one is formed when a release of its first stage's services has rolled out.\n", resp.GetPipeline())
		return err
	}
	// One column per stage, in the order the bundles' records name them
	// (the pipeline's order).
	var stages []string
	seen := map[string]bool{}
	for i := len(bundles) - 1; i >= 0; i-- {
		for _, r := range bundles[i].GetRecords() {
			if !seen[r.GetStage()] {
				seen[r.GetStage()] = true
				stages = append(stages, r.GetStage())
			}
		}
	}
	fmt.Fprintf(w, "Pipeline %s\n", resp.GetPipeline())
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(append([]string{"BUNDLE", "CREATED", "IMAGE", "DIGEST"}, upper(stages)...), "\t"))
	for _, b := range bundles {
		state := map[string]string{}
		for _, r := range b.GetRecords() {
			state[r.GetStage()] = r.GetStatus()
			if r.GetCurrent() {
				state[r.GetStage()] += " (current)"
			}
		}
		created := "-"
		if b.GetCreated() != nil {
			created = ago(now.Sub(b.GetCreated().AsTime()))
		}
		imgs := b.GetImages()
		if len(imgs) == 0 {
			imgs = []*fluxdv1.BundleImage{{}}
		}
		for i, img := range imgs {
			cols := []string{"", "", img.GetRepository() + ":" + img.GetTag(), shortDigest(img.GetDigest())}
			for _, st := range stages {
				// Every row has every column, so that tabwriter aligns
				// them across a bundle's further images.
				if i == 0 {
					cols = append(cols, orDash(state[st]))
				} else {
					cols = append(cols, "")
				}
			}
			if i == 0 {
				cols[0], cols[1] = b.GetId(), created
			}
			fmt.Fprintln(tw, strings.Join(cols, "\t"))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A bundle's further images leave its stage columns empty: no
	// padding after them.
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		if strings.HasSuffix(line, "\n") {
			line = strings.TrimRight(line, " \n") + "\n"
		}
		if _, err := io.WriteString(w, line); err != nil {
			return err
		}
	}
	return nil
}

// shortDigest is a digest's algorithm and first 12 hex digits.
func shortDigest(d string) string {
	if alg, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return alg + ":" + hex[:12]
	}
	return orDash(d)
}

func upper(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToUpper(s)
	}
	return out
}
