package webhook

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseNotification(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, source string
		want               []string
	}{
		{"dockerhub", `{"push_data":{"tag":"1.2"},"repository":{"repo_name":"team/app"}}`, "dockerhub", []string{"team/app:1.2"}},
		{"distribution", `{"events":[{"action":"pull","target":{"repository":"app","tag":"1"},"request":{"host":"reg:5000"}},
			{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"reg:5000"}},
			{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"reg:5000"}}]}`, "distribution", []string{"reg:5000/app:2"}},
		// A push sends an event per blob (no tag) and one per manifest:
		// only the manifest's costs a refresh.
		{"distribution blobs and a manifest", `{"events":[{"action":"push","target":{"mediaType":"application/octet-stream","repository":"app","digest":"sha256:aa"},"request":{"host":"reg:5000"}},
			{"action":"push","target":{"mediaType":"application/vnd.docker.container.image.v1+json","repository":"app","digest":"sha256:bb"},"request":{"host":"reg:5000"}},
			{"action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":"app","tag":"3"},"request":{"host":"reg:5000"}}]}`, "distribution", []string{"reg:5000/app:3"}},
		{"harbor", `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"resource_url":"harbor.example/proj/app:3"}]}}`, "harbor", []string{"harbor.example/proj/app:3"}},
		{"quay", `{"repository":"ns/app","docker_url":"quay.io/ns/app","updated_tags":["4","5"]}`, "quay", []string{"quay.io/ns/app"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, source, err := parseNotification([]byte(tc.body))
			if err != nil || source != tc.source {
				t.Fatalf("parse: %v, %q", err, source)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	blobs := `{"events":[{"action":"push","target":{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","repository":"app","digest":"sha256:aa"},"request":{"host":"reg:5000"}},
		{"action":"push","target":{"mediaType":"application/octet-stream","repository":"app","digest":"sha256:bb"},"request":{"host":"reg:5000"}}]}`
	if got, _, err := parseNotification([]byte(blobs)); !errors.Is(err, errNoPushEvents) {
		t.Errorf("an envelope of blob pushes = %v, %v; want nothing to refresh", got, err)
	}
	for _, bad := range []string{`not json`, `{}`, `{"type":"DELETE_ARTIFACT","event_data":{}}`, `{"events":[{"action":"pull"}]}`} {
		if _, _, err := parseNotification([]byte(bad)); err == nil {
			t.Errorf("parse(%s) succeeded", bad)
		}
	}
}

// FuzzParseNotification: parsing any payload must not panic, and a parsed
// payload names at least one image and its sender. (The daemon's
// FuzzWebhook sends the same payloads through the handler to a real
// daemon.)
func FuzzParseNotification(f *testing.F) {
	for _, s := range []string{
		`{"push_data":{"tag":"1.2"},"repository":{"repo_name":"team/app"}}`,
		`{"push_data":{},"repository":{"repo_name":"team/app"}}`,
		`{"push_data":{"tag":"1.2"},"repository":"team/app"}`,
		`{"events":[{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"reg:5000"}},{"action":"pull","target":{"repository":"app"},"request":{"host":"reg:5000"}}]}`,
		`{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"resource_url":"harbor.example/proj/app:3"},{"resource_url":""}]}}`,
		`{"type":"DELETE_ARTIFACT","event_data":{"resources":[]}}`,
		`{"repository":"ns/app","docker_url":"quay.io/ns/app","updated_tags":["4","5"]}`,
		`{"docker_url":"quay.io/ns/app:1.0\nimage: evil"}`,
		`{"push_data":{"tag":"a\"b"},"repository":{"repo_name":"Team/App"}}`,
		`{}`, `[]`, `null`, `not json`,
		// Host fields naming other hosts: an internal service, a
		// metadata address, a watched path on another host, userinfo.
		`{"events":[{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"127.0.0.1:8080"}}]}`,
		`{"events":[{"action":"push","target":{"repository":"latest/meta-data","tag":"1"},"request":{"host":"169.254.169.254"}}]}`,
		`{"events":[{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"reg:5000@evil.example"}}]}`,
		`{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"resource_url":"10.0.0.1:5000/proj/app:3"}]}}`,
		`{"docker_url":"localhost:2375/ns/app"}`,
		`{"push_data":{"tag":"1"},"repository":{"repo_name":"evil.example/team/app"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		images, source, err := parseNotification(body)
		if err == nil {
			if len(images) == 0 || (source != "dockerhub" && source != "distribution" && source != "harbor" && source != "quay") {
				t.Fatalf("parseNotification(%q) = %q from %q: no image, or an unknown sender", body, images, source)
			}
			for _, img := range images {
				if img == "" {
					t.Fatalf("parseNotification(%q) = %q: an empty image", body, images)
				}
			}
		}
	})
}
