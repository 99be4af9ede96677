package localstack

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Restart stops a component the stack started (SIGTERM, as an operator's
// restart does), keeps it down for down, and starts it again with the
// same arguments (so the same ports and data), waiting until it is ready:
// for fault tests of what fluxd does when the cluster's control plane
// goes away and comes back. Components: etcd, kube-apiserver.
func (s *Stack) Restart(ctx context.Context, name string, down time.Duration) error {
	var p *process
	for _, q := range s.procs {
		if q.name == name {
			p = q
		}
	}
	if p == nil {
		return fmt.Errorf("restart: the stack did not start %s", name)
	}
	p.stop(10 * time.Second)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	np, err := s.spawn(name, p.cmd.Path, p.cmd.Args[1:]...)
	if err != nil {
		return err
	}
	var api *process
	switch name {
	case "etcd":
		if err := waitFor(ctx, np, 60*time.Second, "etcd /health", func() error { return httpOK(http.DefaultClient, s.etcdURL+"/health", "") }); err != nil {
			return err
		}
	case "kube-apiserver":
		api = np
	default:
		return nil
	}
	// Either way, the cluster is back when the API server is ready.
	return waitFor(ctx, api, 120*time.Second, "kube-apiserver /readyz", func() error {
		return httpOK(s.http, s.APIServer+"/readyz", s.adminToken)
	})
}
