package daemon

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fielddiff"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// manifestID is the workload of the manifest tests.
var manifestID = platform.ID{Namespace: "shop", Kind: "deployment", Name: "web"}

// The secret someone set outside git: kubectl set env deployment/web
// DB_PASSWORD=hunter2.
const outsideGit = "hunter2"

// manifestCluster compares as platform/kube's Compare does, over a real
// Deployment: git adds FEATURE=on to the container's environment, the
// live object holds DB_PASSWORD set by kubectl, and the server-side
// apply keeps it (its field manager is not fluxd), after git's entries.
type manifestCluster struct{ stubCluster }

func (manifestCluster) Resources(context.Context, platform.ID) (*platform.Resources, error) {
	return &platform.Resources{}, nil
}

func (manifestCluster) PodLog(context.Context, platform.ID, string, platform.LogOptions) (*platform.PodLog, error) {
	return nil, platform.ErrNoLog
}

func (manifestCluster) Compare(_ context.Context, id platform.ID, _ []byte) (*platform.Comparison, error) {
	deployment := func(env ...corev1.EnvVar) map[string]any {
		d := &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: id.Name, Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-01T10:00:00Z"}},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "reg.example/shop/web:1", Env: env}},
			}}},
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
		if err != nil {
			panic(err)
		}
		return m
	}
	mode := corev1.EnvVar{Name: "APP_MODE", Value: "prod"}
	secret := corev1.EnvVar{Name: "DB_PASSWORD", Value: outsideGit}
	live := deployment(mode, secret)
	merged := deployment(mode, corev1.EnvVar{Name: "FEATURE", Value: "on"}, secret)
	y, err := sigyaml.Marshal(live)
	if err != nil {
		return nil, err
	}
	return &platform.Comparison{Live: y, Action: platform.ActionChanged, Diff: fielddiff.Lines(live, merged)}, nil
}

// documentReleaser has the workload's manifest in git.
type documentReleaser struct{ stubReleaser }

func (documentReleaser) Manifests(context.Context) (string, *gitrepo.Manifests, error) {
	return "rev", &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{
		manifestID: {ID: manifestID, File: "shop/web.yaml", Line: 1, Containers: []gitrepo.Container{{Name: "app", Image: "reg.example/shop/web:1"}}, Annotations: map[string]string{}},
	}}, nil
}

func (documentReleaser) Document(context.Context, string, platform.ID) (string, []byte, error) {
	return "rev", []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\n" +
		"spec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: reg.example/shop/web:1\n" +
		"        env:\n        - {name: APP_MODE, value: prod}\n        - {name: FEATURE, value: 'on'}\n"), nil
}

// A viewer's GetManifest holds nothing the cluster has beyond git: no
// live object, and the diff's paths without their values (one of which
// would be the password kubectl set), and says so (redacted). A deployer
// and an admin get the live object and the values, as before.
func TestGetManifestRedactsTheLiveObjectForViewers(t *testing.T) {
	cluster := &manifestCluster{stubCluster{workloads: []platform.Workload{
		{ID: manifestID, Containers: []platform.Container{{Name: "app", Image: "reg.example/shop/web:1"}}, Status: "ready"},
	}}}
	f := newFixtureWith(t, Config{}, Deps{Cluster: cluster, Releaser: documentReleaser{}, Jobs: stubJobs{}})
	// The comparison as a deployer gets it: the secret is in the live
	// object and in a diff line's value, so redacting only one would
	// show.
	full, err := cluster.Compare(context.Background(), manifestID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(full.Live), outsideGit) || !strings.Contains(strings.Join(full.Diff, "\n"), outsideGit) {
		t.Fatalf("the fixture does not carry the secret in both the live object and the diff:\n%s\n%q", full.Live, full.Diff)
	}
	for _, tc := range []struct {
		role     auth.Role
		redacted bool
	}{
		{auth.Viewer, true},
		{auth.Deployer, false},
		{auth.Admin, false},
	} {
		t.Run(tc.role.String(), func(t *testing.T) {
			resp, err := f.client.GetManifest(withToken(f.tokens[tc.role]), &fluxdv1.GetManifestRequest{Service: manifestID.String()})
			if err != nil {
				t.Fatal(err)
			}
			text := prototext.Format(resp)
			if resp.GetGit() == "" || resp.GetAction() != platform.ActionChanged || len(resp.GetDiff()) != len(full.Diff) {
				t.Errorf("the manifest lacks git, the action or the diff's lines (want %d):\n%s", len(full.Diff), text)
			}
			if resp.GetRedacted() != tc.redacted {
				t.Errorf("redacted = %v, want %v", resp.GetRedacted(), tc.redacted)
			}
			if !tc.redacted {
				if resp.GetLive() != string(full.Live) || strings.Join(resp.GetDiff(), "\n") != strings.Join(full.Diff, "\n") {
					t.Errorf("a %s's manifest is not the whole comparison:\n%s", tc.role, text)
				}
				return
			}
			if strings.Contains(text, outsideGit) {
				t.Errorf("a viewer's manifest shows the value set outside git (%s):\n%s", outsideGit, text)
			}
			if resp.GetLive() != "" {
				t.Errorf("a viewer got the live object:\n%s", resp.GetLive())
			}
			for i, line := range resp.GetDiff() {
				if path, _, _ := strings.Cut(full.Diff[i], ": "); line != path {
					t.Errorf("a viewer's diff line %q, want the path alone, %q", line, path)
				}
			}
		})
	}
}
