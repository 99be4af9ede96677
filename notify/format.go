package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The headers every delivery carries.
const (
	// HeaderEventID is the notice's ID: the same on every delivery of
	// one notice, so that a receiver can drop a duplicate.
	HeaderEventID = "X-Fluxd-Event-Id"
	// HeaderEvent is the message's Kind.
	HeaderEvent = "X-Fluxd-Event"
	// HeaderSignature is "sha256=" and the hex HMAC-SHA256 of the body,
	// keyed with the webhook's secret.
	HeaderSignature = "X-Fluxd-Signature-256"
)

// Sign is the X-Fluxd-Signature-256 value of body under key.
func Sign(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// request builds the receiver's request for m.
func (r *Receiver) request(ctx context.Context, m *Message) (*http.Request, error) {
	var (
		target = r.URL
		body   any
	)
	switch r.Kind {
	case Webhook:
		body = m
	case Slack:
		body = slackBody(m)
	case Teams:
		body = teamsBody(m)
	case Discord:
		body = discordBody(m)
	case GitHub, Gitea:
		target = strings.TrimRight(r.URL, "/") + "/repos/" + strings.Trim(r.Repository, "/") + "/statuses/" + url.PathEscape(m.Commit)
		body = map[string]string{"state": m.forgeState(), "target_url": m.URL, "description": statusDescription(m), "context": "fluxd/" + m.Instance}
	case GitLab:
		state := m.forgeState()
		if state == "failure" {
			state = "failed"
		}
		target = strings.TrimRight(r.URL, "/") + "/projects/" + url.PathEscape(strings.Trim(r.Repository, "/")) + "/statuses/" + url.PathEscape(m.Commit)
		body = map[string]string{"state": state, "target_url": m.URL, "description": statusDescription(m), "name": "fluxd/" + m.Instance}
	default:
		return nil, fmt.Errorf("receiver type %q is not implemented", r.Kind)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(b))
	if err != nil {
		// Not wrapped: url.Parse's error quotes the URL.
		return nil, fmt.Errorf("the receiver's url cannot be used")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "fluxd")
	req.Header.Set(HeaderEventID, m.ID)
	req.Header.Set(HeaderEvent, m.Kind)
	switch r.Kind {
	case Webhook:
		req.Header.Set(HeaderSignature, Sign([]byte(r.Secret), b))
	case GitHub:
		req.Header.Set("Authorization", "token "+r.Secret)
		req.Header.Set("Accept", "application/vnd.github+json")
	case Gitea:
		req.Header.Set("Authorization", "token "+r.Secret)
	case GitLab:
		req.Header.Set("PRIVATE-TOKEN", r.Secret)
	}
	return req, nil
}

// statusDescription is a commit status's description: GitHub keeps at
// most 140 characters.
func statusDescription(m *Message) string {
	d := m.Title()
	if m.Error != "" {
		d += ": " + m.Error
	}
	if r := []rune(d); len(r) > 140 {
		d = string(r[:139]) + "…"
	}
	return d
}

// slackBody is a Slack incoming webhook's message: text (the
// notification's fallback) and blocks.
func slackBody(m *Message) any {
	text := "*" + slackEscape(m.Title()) + "*"
	if lines := m.Lines(); len(lines) > 0 {
		var esc []string
		for _, l := range lines {
			esc = append(esc, slackEscape(l))
		}
		text += "\n" + strings.Join(esc, "\n")
	}
	if m.URL != "" {
		text += "\n<" + m.URL + "|Open in fluxd>"
	}
	return map[string]any{
		"text":   m.Title(),
		"blocks": []any{map[string]any{"type": "section", "text": map[string]string{"type": "mrkdwn", "text": text}}},
	}
}

// slackEscape escapes the three characters Slack's mrkdwn reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// teamsBody is an Adaptive Card in a message, as Teams' Workflows
// webhooks take it.
func teamsBody(m *Message) any {
	body := []any{map[string]any{"type": "TextBlock", "text": m.Title(), "weight": "Bolder", "wrap": true, "color": teamsColor(m)}}
	for _, l := range m.Lines() {
		body = append(body, map[string]any{"type": "TextBlock", "text": l, "wrap": true, "spacing": "None"})
	}
	card := map[string]any{
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
		"type":    "AdaptiveCard",
		"version": "1.4",
		"body":    body,
	}
	if m.URL != "" {
		card["actions"] = []any{map[string]string{"type": "Action.OpenUrl", "title": "Open in fluxd", "url": m.URL}}
	}
	return map[string]any{
		"type":        "message",
		"attachments": []any{map[string]any{"contentType": "application/vnd.microsoft.card.adaptive", "content": card}},
	}
}

func teamsColor(m *Message) string {
	if m.failed() {
		return "Attention"
	}
	return "Good"
}

// discordBody is a Discord webhook's message: one embed.
func discordBody(m *Message) any {
	color := 0x2eb886
	if m.failed() {
		color = 0xd00000
	}
	desc := strings.Join(m.Lines(), "\n")
	if r := []rune(desc); len(r) > 4000 {
		desc = string(r[:3999]) + "…"
	}
	embed := map[string]any{"title": truncate(m.Title(), 256), "description": desc, "color": color, "timestamp": m.Time.UTC().Format("2006-01-02T15:04:05Z")}
	if m.URL != "" {
		embed["url"] = m.URL
	}
	return map[string]any{"content": truncate(m.Title(), 2000), "embeds": []any{embed}, "allowed_mentions": map[string]any{"parse": []string{}}}
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
