package oci

import (
	"time"

	"github.com/fluxd/fluxd/registry"
)

type repoStatus struct {
	running int
	registry.RefreshStatus
}

// Status says whether a repository is being refreshed, and how the last
// refresh went.
func (c *Client) Status(repository string) registry.RefreshStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.status[repository]; ok {
		return st.RefreshStatus
	}
	return registry.RefreshStatus{}
}

func (c *Client) begin(repository string) func(error) {
	c.mu.Lock()
	st, ok := c.status[repository]
	if !ok {
		st = &repoStatus{}
		c.status[repository] = st
	}
	if st.running == 0 {
		st.Refreshing, st.Since = true, c.cfg.Now()
	}
	st.running++
	c.mu.Unlock()
	return func(err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		st.running--
		st.Refreshing = st.running > 0
		if err != nil {
			st.LastError = err.Error()
		} else {
			st.LastError, st.RefreshedAt = "", c.cfg.Now()
		}
	}
}

// recheck is the wait before the next HEAD of a mutable tag whose digest
// was found the same stable times in a row.
func (c *Client) recheck(stable int) time.Duration {
	return backoff(c.cfg.RecheckMin, c.cfg.RecheckMax, stable)
}

// backoff is lo doubled stable times, at most hi.
func backoff(lo, hi time.Duration, stable int) time.Duration {
	d := lo
	for i := 0; i < stable && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}
