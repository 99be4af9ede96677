package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A replica that cannot clone does not campaign: it would hold the Lease
// and lead nothing (leading waits for the clone) while a replica that can
// clone waits forever. Here the broken one starts first, and the Lease
// goes to the one that cloned.
func TestLeaderIsAReplicaThatCloned(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx := testContext(t)
	admin := kubeClient(t)
	const lease = "clone-first"
	election := []string{"--leader-elect", "--leader-elect-namespace=default", "--leader-elect-lease-name=" + lease,
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms"}
	t.Cleanup(func() {
		_ = admin.CoordinationV1().Leases("default").Delete(ctx, lease, metav1.DeleteOptions{})
	})
	broken := startFaultFluxd(t, "fluxd-noclone", stack.GitPath, nil,
		append([]string{"--git-url=file://" + filepath.Join(t.TempDir(), "no-such-repo.git")}, election...)...)
	// Long enough for a replica that campaigns regardless to take the
	// Lease (retry period 500 ms).
	time.Sleep(3 * time.Second)
	if l, err := admin.CoordinationV1().Leases("default").Get(ctx, lease, metav1.GetOptions{}); err == nil &&
		l.Spec.HolderIdentity != nil && strings.HasPrefix(*l.Spec.HolderIdentity, broken.Addr+"#") {
		t.Errorf("the replica that cannot clone holds the Lease %s", lease)
	}
	good := startFaultFluxd(t, "fluxd-cloned", stack.GitPath, nil, election...)
	err := poll(ctx, 30*time.Second, func() error {
		l, err := admin.CoordinationV1().Leases("default").Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, good.Addr+"#") {
			return fmt.Errorf("lease %s held by %v, want the replica that cloned (%s)", lease, l.Spec.HolderIdentity, good.Addr)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v (logs: %s, %s)", err, stack.Log("fluxd-noclone"), stack.Log("fluxd-cloned"))
	}
}
