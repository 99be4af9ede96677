package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// payload is every registry's notification at once: the fields that tell
// the senders apart (push_data, events, event_data, docker_url) are
// decoded together, and the first present names the sender.
type payload struct {
	// Docker Hub
	PushData *struct {
		Tag string `json:"tag"`
	} `json:"push_data"`
	// Repository is Docker Hub's object, and Quay's string.
	Repository json.RawMessage `json:"repository"`
	// CNCF distribution
	Events []distributionEvent `json:"events"`
	// Harbor
	Type      string `json:"type"`
	EventData *struct {
		Resources []struct {
			ResourceURL string `json:"resource_url"`
		} `json:"resources"`
	} `json:"event_data"`
	// Quay
	DockerURL   string   `json:"docker_url"`
	UpdatedTags []string `json:"updated_tags"`
}

type distributionEvent struct {
	Action string `json:"action"`
	Target struct {
		MediaType  string `json:"mediaType"`
		Repository string `json:"repository"`
		Tag        string `json:"tag"`
	} `json:"target"`
	Request struct {
		Host string `json:"host"`
	} `json:"request"`
}

// errNoPushEvents is a distribution envelope with no push event in it:
// pulls, deletes, mounts. Nothing to refresh, and no error to the sender.
var errNoPushEvents = errors.New("a distribution notification without push events")

// parseNotification finds the pushed images in a registry's payload and
// names the kind of sender.
func parseNotification(body []byte) ([]string, string, error) {
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, "", fmt.Errorf("the payload is not JSON: %v", err)
	}
	switch {
	case p.PushData != nil:
		return dockerHubImages(p)
	case len(p.Events) > 0:
		return distributionImages(p.Events)
	case p.EventData != nil:
		return harborImages(p)
	case p.DockerURL != "":
		// Quay lists the updated tags; the repository is refreshed as a
		// whole either way.
		return []string{p.DockerURL}, "quay", nil
	}
	return nil, "", errors.New("the payload is none of Docker Hub, distribution, Harbor or Quay")
}

// dockerHubImages is the one image of a Docker Hub push.
func dockerHubImages(p payload) ([]string, string, error) {
	var repo struct {
		RepoName string `json:"repo_name"`
	}
	if err := json.Unmarshal(p.Repository, &repo); err != nil || repo.RepoName == "" {
		return nil, "", errors.New("a Docker Hub payload without repository.repo_name")
	}
	return []string{withTag(repo.RepoName, p.PushData.Tag)}, "dockerhub", nil
}

// distributionImages are the manifests pushed in a distribution
// registry's envelope of events.
func distributionImages(events []distributionEvent) ([]string, string, error) {
	var images []string
	for _, e := range events {
		if e.Action != "push" || e.Target.Repository == "" || e.Request.Host == "" || blobPush(e.Target.Tag, e.Target.MediaType) {
			continue
		}
		images = append(images, withTag(e.Request.Host+"/"+e.Target.Repository, e.Target.Tag))
	}
	if len(images) == 0 {
		return nil, "", errNoPushEvents
	}
	return dedupe(images), "distribution", nil
}

// harborImages are the artifacts of a Harbor push.
func harborImages(p payload) ([]string, string, error) {
	if p.Type != "PUSH_ARTIFACT" && p.Type != "pushImage" {
		return nil, "", fmt.Errorf("a Harbor %q event; only pushes are handled", p.Type)
	}
	var images []string
	for _, r := range p.EventData.Resources {
		if r.ResourceURL != "" {
			images = append(images, r.ResourceURL)
		}
	}
	if len(images) == 0 {
		return nil, "", errors.New("a Harbor payload without event_data.resources[].resource_url")
	}
	return dedupe(images), "harbor", nil
}

// blobPush reports whether a distribution push event is of a blob (a
// layer or a config): the registry sends one per blob before the
// manifest's, and only the manifest's names a tag. A blob changes no tag,
// so it costs no refresh; an untagged manifest push (by digest) without
// a media type is still refreshed, in doubt.
func blobPush(tag, mediaType string) bool {
	if tag != "" {
		return false
	}
	mt := strings.ToLower(mediaType)
	return mt != "" && !strings.Contains(mt, "manifest") && !strings.Contains(mt, "image.index")
}

func withTag(repo, tag string) string {
	if tag == "" {
		return repo
	}
	return repo + ":" + tag
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
