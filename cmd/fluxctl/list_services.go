package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newListServicesCommand(g *globals) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:     "list-services",
		Aliases: []string{"services"},
		Short:   "List the services (workloads) fluxd knows",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(g.output); err != nil {
				return err
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runListServices(ctx, cmd.OutOrStdout(), c, namespace, g.output)
			})
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "only this namespace (default: all)")
	addOutputFlag(cmd, g)
	return cmd
}

// serviceJSON is the stable JSON shape of one service.
type serviceJSON struct {
	ID         string          `json:"id"`
	Status     string          `json:"status"`
	InGit      bool            `json:"inGit"`
	Automated  bool            `json:"automated"`
	Locked     bool            `json:"locked"`
	LockMsg    string          `json:"lockMessage,omitempty"`
	Containers []containerJSON `json:"containers"`
	Replicas   replicasJSON    `json:"replicas"`
}

type containerJSON struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	Init  bool   `json:"init,omitempty"`
}

type replicasJSON struct {
	Desired   int32 `json:"desired"`
	Updated   int32 `json:"updated"`
	Ready     int32 `json:"ready"`
	Available int32 `json:"available"`
}

func runListServices(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, namespace, output string) error {
	resp, err := c.ListServices(ctx, &fluxdv1.ListServicesRequest{Namespace: namespace})
	if err != nil {
		return err
	}
	if output == "json" {
		out := []serviceJSON{}
		for _, s := range resp.GetServices() {
			sj := serviceJSON{ID: s.GetId(), Status: s.GetStatus(), InGit: s.GetInGit(), Automated: s.GetAutomated(), Locked: s.GetLocked(), LockMsg: s.GetLockMessage(), Containers: []containerJSON{}}
			for _, c := range s.GetContainers() {
				sj.Containers = append(sj.Containers, containerJSON{Name: c.GetName(), Image: c.GetImage(), Init: c.GetInit()})
			}
			r := s.GetReplicas()
			sj.Replicas = replicasJSON{Desired: r.GetDesired(), Updated: r.GetUpdated(), Ready: r.GetReady(), Available: r.GetAvailable()}
			out = append(out, sj)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tSTATUS\tREADY\tPOLICY\tCONTAINER\tIMAGE")
	for _, s := range resp.GetServices() {
		r := s.GetReplicas()
		ready := fmt.Sprintf("%d/%d", r.GetReady(), r.GetDesired())
		if !s.GetInGit() {
			ready += " (not in git)"
		}
		ready += "\t" + policy(s)
		if len(s.GetContainers()) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\n", s.GetId(), s.GetStatus(), ready)
		}
		for i, c := range s.GetContainers() {
			name := c.GetName()
			if c.GetInit() {
				name += " (init)"
			}
			if i == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.GetId(), s.GetStatus(), ready, name, c.GetImage())
			} else {
				fmt.Fprintf(tw, "\t\t\t\t%s\t%s\n", name, c.GetImage())
			}
		}
	}
	return tw.Flush()
}

func policy(s *fluxdv1.Service) string {
	var p []string
	if s.GetAutomated() {
		p = append(p, "automated")
	}
	if s.GetLocked() {
		p = append(p, "locked")
	}
	if len(p) == 0 {
		return "-"
	}
	return strings.Join(p, ",")
}
