package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// completionTimeout bounds a completion's call to fluxd: a shell waits on
// it at every Tab.
const completionTimeout = 3 * time.Second

// wireCompletions gives the commands dynamic shell completion (cobra's
// `fluxctl completion bash|zsh|fish|powershell`): service names and job
// IDs asked of fluxd, event types and -o values from the lists the
// commands check against. A fluxd that cannot be reached completes
// nothing, quietly.
func wireCompletions(root *cobra.Command, g *globals) {
	services := completeFromFluxd(g, listServiceNames)
	jobs := completeFromFluxd(g, listJobIDs)
	pipelines := completeFromFluxd(g, listPipelineNames)
	stages := completeFromFluxd(g, listStageNames)
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "stages", "bundles":
			cmd.ValidArgsFunction = firstArg(pipelines)
			for _, sub := range cmd.Commands() {
				sub.ValidArgsFunction = firstArg(stages)
				_ = sub.RegisterFlagCompletionFunc("pipeline", pipelines)
			}
		case "promote", "approve":
			_ = cmd.RegisterFlagCompletionFunc("pipeline", pipelines)
			_ = cmd.RegisterFlagCompletionFunc(map[string]string{"promote": "to", "approve": "stage"}[cmd.Name()], stages)
		case "list-images", "policy", "automate", "deautomate", "lock", "unlock", "history", "rollback":
			cmd.ValidArgsFunction = firstArg(services)
		case "job", "cancel":
			cmd.ValidArgsFunction = firstArg(jobs)
		case "release":
			_ = cmd.RegisterFlagCompletionFunc("service", services)
			_ = cmd.RegisterFlagCompletionFunc("exclude", services)
		}
		if cmd.Name() == "history" {
			_ = cmd.RegisterFlagCompletionFunc("type", fixed(eventTypes))
		}
	}
}

// fixed completes from a fixed list.
func fixed(list []string) completer {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return withPrefix(list, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func withPrefix(list []string, prefix string) []string {
	var out []string
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

type completer = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)

// firstArg completes only a command's first argument.
func firstArg(f completer) completer {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f(cmd, args, toComplete)
	}
}

// completeFromFluxd asks fluxd for candidates, with the flags and
// environment variables the command itself would use.
func completeFromFluxd(g *globals, list func(context.Context, fluxdv1.FluxServiceClient) ([]string, error)) completer {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if pre := cmd.Root().PersistentPreRunE; pre != nil {
			if err := pre(cmd, nil); err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
		}
		if g.timeout <= 0 || g.timeout > completionTimeout {
			g.timeout = completionTimeout
		}
		var all []string
		err := g.call(context.Background(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
			var err error
			all, err = list(ctx, c)
			return err
		})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		return withPrefix(all, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// listServiceNames offers each service by its full ID and by its name
// where that is unambiguous, as fluxd resolves them.
func listServiceNames(ctx context.Context, c fluxdv1.FluxServiceClient) ([]string, error) {
	resp, err := c.ListServices(ctx, &fluxdv1.ListServicesRequest{})
	if err != nil {
		return nil, err
	}
	names := map[string]int{}
	for _, s := range resp.GetServices() {
		if _, rest, ok := strings.Cut(s.GetId(), "/"); ok {
			names[rest]++
		}
	}
	var out []string
	for _, s := range resp.GetServices() {
		out = append(out, s.GetId())
		if _, name, ok := strings.Cut(s.GetId(), "/"); ok && names[name] == 1 {
			out = append(out, name)
		}
	}
	return out, nil
}

// listPipelineNames offers the pipelines the token may see.
func listPipelineNames(ctx context.Context, c fluxdv1.FluxServiceClient) ([]string, error) {
	resp, err := c.ListPipelines(ctx, &fluxdv1.ListPipelinesRequest{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range resp.GetPipelines() {
		out = append(out, p.GetName())
	}
	return out, nil
}

// listStageNames offers the stages the token may see, of every pipeline.
func listStageNames(ctx context.Context, c fluxdv1.FluxServiceClient) ([]string, error) {
	resp, err := c.ListPipelines(ctx, &fluxdv1.ListPipelinesRequest{})
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range resp.GetPipelines() {
		for _, s := range p.GetStages() {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func listJobIDs(ctx context.Context, c fluxdv1.FluxServiceClient) ([]string, error) {
	resp, err := c.ListJobs(ctx, &fluxdv1.ListJobsRequest{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, j := range resp.GetJobs() {
		out = append(out, j.GetId())
	}
	return out, nil
}
