package webhook

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/util/workqueue"

	"github.com/fluxd/fluxd/internal/testcerts"
)

// A notification marked as passed on by a replica is refused without a
// replica certificate: the mark alone is anyone's to write. (The gRPC
// side is the daemon's TestForwardedCallsRequireAReplicaCertificate.)
func TestWebhookPassedOnWithoutAReplicaCertificate(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	replicaCA := testcerts.NewCA(t, "fluxd-replica").Pool()

	h, err := New(refreshNothing{}, workqueue.NewTyped[string](), []byte("s3cret"), log)
	if err != nil {
		t.Fatal(err)
	}
	h.RequireReplicaCerts(replicaCA)
	req := httptest.NewRequest(http.MethodPost, "/v1/notify", strings.NewReader(pushOfApp))
	req.Header.Set("X-Fluxd-Secret", "s3cret")
	req.Header.Set(ForwardedHeader, "1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "replica") {
		t.Fatalf("a passed-on notification without a replica certificate: %d %s", rec.Code, rec.Body)
	}
}

// leadership is a replica's view of the election.
type leadership struct {
	leads bool
	addr  string
}

func (l leadership) IsLeader() bool            { return l.leads }
func (l leadership) LeaderWebhookAddr() string { return l.addr }

// A follower passes an authenticated notification on to the leader, over
// TLS with its replica certificate, and relays the leader's answer; the
// leader queues and refreshes the repository. Without a replica
// certificate the leader refuses it, and the follower says so.
func TestFollowerPassesNotificationsToTheLeader(t *testing.T) {
	ca := testcerts.NewCA(t, "fluxd-replica")
	leaderCert := ca.Issue(t, testcerts.Leaf{Name: "leader"})
	followerCert := ca.Issue(t, testcerts.Leaf{Name: "follower"})

	leader := newTestWebhook(t)
	leader.RequireReplicaCerts(ca.Pool())
	var refreshed []string
	leader.refresh = func(_ context.Context, image string) error {
		refreshed = append(refreshed, image)
		return nil
	}
	srv := httptest.NewUnstartedServer(leader)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaderCert.TLS}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool()}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		want  int
		image []string
	}{
		{"with a replica certificate", []tls.Certificate{followerCert.TLS}, http.StatusAccepted, []string{"reg:5000/app:2"}},
		{"without", nil, http.StatusUnauthorized, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refreshed = nil
			follower := newTestWebhook(t)
			follower.refresh = func(context.Context, string) error {
				t.Error("the follower refreshed a notification it should have passed on")
				return nil
			}
			follower.FollowLeader(leadership{addr: srv.Listener.Addr().String()}, &tls.Config{RootCAs: ca.Pool(), Certificates: tc.certs})
			rec := notify(t, follower, pushOfApp, map[string]string{"X-Fluxd-Secret": "s3cret"})
			if rec.Code != tc.want {
				t.Fatalf("the follower answered %d, want the leader's %d: %s", rec.Code, tc.want, rec.Body)
			}
			for follower.ProcessNext(context.Background()) {
			}
			for leader.ProcessNext(context.Background()) {
			}
			if diff := cmp.Diff(tc.image, refreshed); diff != "" {
				t.Errorf("the leader refreshed (-want +got):\n%s", diff)
			}
		})
	}
}
