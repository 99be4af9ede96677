package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluxd/fluxd/internal/localstack"
)

// upPod runs the demo's fluxd in the cluster, on the real node: the image
// 'make image' builds (from the static binaries 'make static' put in
// staticDir), pushed to the stack's registry, installed with the
// manifests 'fluxctl install' renders (internal/localstack/fluxdpod.go says
// what the stack changes in them). It returns the env lines for .stack/env.
func upPod(ctx context.Context, st *localstack.Stack, root, staticDir string) ([]string, error) {
	t := time.Now()
	version := os.Getenv("VERSION")
	if version == "" {
		version = "dev"
	}
	rev, _ := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/image",
		"--fluxd", filepath.Join(staticDir, "fluxd"), "--fluxctl", filepath.Join(staticDir, "fluxctl"),
		"--version", version, "--revision", strings.TrimSpace(string(rev)),
		"--image", st.Registry+"/fluxd:"+version)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("building fluxd's image (make image): %w", err)
	}
	image := strings.TrimSpace(string(out))
	fmt.Printf("stack: %-34s ready in %v\n", "fluxd's image "+image[strings.LastIndex(image, "@")+1:][:19], time.Since(t).Round(10*time.Millisecond))
	t = time.Now()
	fp, err := st.InstallFluxdPod(ctx, localstack.FluxdPodOptions{
		Fluxctl: filepath.Join(root, "bin", "fluxctl"),
		Image:   image,
		// No --sync-interval: the install's RBAC grants patch on the
		// workload kinds only, not what the sync of every object needs
		// (README: Continuous sync).
	})
	if err != nil {
		return nil, fmt.Errorf("fluxd in a pod: %w", err)
	}
	if err := localstack.RecordFluxdPod(st.Dir, fp.Namespace); err != nil {
		return nil, err
	}
	fmt.Printf("stack: %-34s ready in %v\n", "fluxd's pod on "+localstack.RealNodeName, time.Since(t).Round(10*time.Millisecond))
	return []string{
		"# fluxd runs in a pod (kubectl -n " + fp.Namespace + " get pods) on the host's network:",
		"# FLUX_URL is the pod's own listener on loopback (no kube-proxy here: no NodePort).",
		"export FLUX_URL=" + fp.Addr,
		"export FLUX_TOKEN=" + fp.Tokens["admin"],
		"export FLUX_VIEWER_TOKEN=" + fp.Tokens["viewer"],
		"export FLUX_DEPLOYER_TOKEN=" + fp.Tokens["deployer"],
		"export FLUX_METRICS_URL=http://" + fp.MetricsAddr + "/metrics",
		"export FLUX_WEBHOOK_URL=http://" + fp.WebhookAddr + "/v1/notify",
		"export FLUX_WEBHOOK_SECRET=" + fp.WebhookSecret,
		"export FLUX_WEB_URL=http://" + fp.WebAddr,
		"export FLUX_NAMESPACE=" + fp.Namespace,
		"export GIT_SSH_URL=" + fp.GitURL,
	}, nil
}

// upWithPod finishes 'make up' with fluxd in a pod: .stack/env and what to
// type next.
func upWithPod(ctx context.Context, st *localstack.Stack, dir, binDir string, start time.Time) error {
	root := filepath.Dir(dir)
	staticDir := os.Getenv("STATIC_DIR")
	if staticDir == "" {
		staticDir = filepath.Join(root, "bin", "static")
	}
	fluxEnv, err := upPod(ctx, st, root, staticDir)
	if err != nil {
		return fmt.Errorf("%w\n(logs are in %s/logs; 'make down' stops what started)", err, dir)
	}
	env := append([]string{"# Written by 'make up'. Source it: . .stack/env"}, fluxEnv...)
	env = append(env,
		"export KUBECONFIG="+st.Kubeconfig,
		"export REGISTRY="+st.Registry,
		"export GIT_URL="+st.GitURL,
		"export GIT_BRANCH="+st.GitBranch,
		"export GIT_PATH="+st.GitPath,
		"export PATH="+filepath.Join(root, "bin")+":"+binDir+":$PATH",
	)
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Printf("stack: everything up in %v\n\n", time.Since(start).Round(100*time.Millisecond))
	fmt.Printf("fluxd runs in a pod on the real node %s: kubectl -n fluxd get pods -o wide; kubectl -n fluxd logs deploy/fluxd\n", localstack.RealNodeName)
	fmt.Println("The status page: $FLUX_WEB_URL (sign in with $FLUX_TOKEN, or $FLUX_VIEWER_TOKEN to only look)")
	fmt.Println()
	printNext(dir, true)
	return nil
}
