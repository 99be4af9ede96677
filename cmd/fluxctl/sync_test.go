package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func TestPrintSync(t *testing.T) {
	t.Parallel()
	resp := &fluxdv1.SyncResponse{Revision: "0123456789abcdef0123", DryRun: true, Objects: []*fluxdv1.SyncObject{
		{Object: "ConfigMap/shop/settings", Source: "shop/settings.yaml:2", Action: "configured", Diff: []string{"replace /data/greeting: bonjour"}},
		{Object: "Deployment/shop/bad", Source: "shop/bad.yaml:9", Action: "failed", Error: "refused"},
		{Object: "Deployment/shop/web", Source: "shop/web.yaml:1", Action: "unchanged"},
		{Object: "ConfigMap/shop/gone", Action: "deleted"},
	}, Problems: []string{"shop/broken.yaml:3: malformed YAML"}}
	var b bytes.Buffer
	printSync(&b, resp)
	want := `Dry run of a sync of 0123456789ab (nothing was changed):
  ConfigMap/shop/settings would be configured (shop/settings.yaml:2)
      replace /data/greeting: bonjour
  Deployment/shop/bad failed (shop/bad.yaml:9): refused
  ConfigMap/shop/gone would be deleted
1 would be configured, 1 would be deleted, 1 unchanged, 1 failed.
Not read: shop/broken.yaml:3: malformed YAML
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
