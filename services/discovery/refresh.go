package discovery

import (
	"github.com/mcpbus/mcpbus/pkg/config"
)

// A new generation (a cache reset) never makes a lookup wait for an
// upstream that was discovered before: each deployment server's entry of
// the previous generation is served, stale, while that server is
// rediscovered in the background, one discovery per server. When a
// server's rediscovery ends, its result replaces the stale entry (or the
// server is marked failed, with no entry) and the catalog is published
// again and announced for that server alone (onReady), so clients learn of
// each server as soon as it is ready, not after the slowest one.

// refreshLocked starts (or joins) the background rediscovery of srv in
// generation gen, whose stale entry is served meanwhile. c.mu must be held.
func (c *cache) refreshLocked(srv *config.Server, chain string, gen int64) {
	c.flightLocked(srv, chain, gen, "").refresh = true
}

// republish runs once server's background rediscovery in generation gen
// has stored its outcome: in the background, it builds the catalog of the
// latest configuration again and announces it for server. Nothing happens
// when the generation moved on or the cache is closing.
func (c *cache) republish(server string, gen int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ext := c.lastExt
	// c.life ends under c.mu (close), so no task is added once close
	// waits for them.
	if ext == nil || c.gen != gen || c.life.Err() != nil {
		return
	}
	c.tasks.Add(1)
	go func() {
		defer c.tasks.Done()
		p, err := c.joinPass(ext).Wait(c.life)
		if err != nil || p.retry || p.cat == nil || p.cat.gen != gen {
			return
		}
		if c.onReady != nil {
			c.onReady(p.cat, server)
		}
	}()
}
