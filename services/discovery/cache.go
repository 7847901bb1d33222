package discovery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
)

// entry is one server's cached discovery result.
type entry struct {
	fingerprint  string
	interceptors string
	tools        []mcpclient.Tool
	discoveredAt time.Time
}

// pass is one discovery pass in flight; concurrent lookups share it.
type pass struct {
	done chan struct{}
	cat  *catalog
	err  error
}

// cache is the per-server tool cache. Lookups that find every enabled
// server cached with an unchanged fingerprint never talk to an upstream.
type cache struct {
	log     *slog.Logger
	onEvent func(gen int64, hash string)

	mu       sync.Mutex
	gen      int64
	entries  map[string]*entry
	failures map[string]string
	current  *catalog
	inflight *pass
	wg       sync.WaitGroup
	lastHash string
}

func newCache(log *slog.Logger, onEvent func(int64, string)) *cache {
	return &cache{log: log, onEvent: onEvent, entries: map[string]*entry{}, failures: map[string]string{}}
}

// reset drops every entry (a new generation).
func (c *cache) reset(gen int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen < c.gen {
		return
	}
	c.gen = gen
	c.entries = map[string]*entry{}
	c.failures = map[string]string{}
	c.current = nil
}

// wait blocks until background passes have finished.
func (c *cache) wait() { c.wg.Wait() }

// get returns the catalog for snap, discovering what is missing or changed.
func (c *cache) get(ctx context.Context, snap sharedstate.Snapshot) (*catalog, error) {
	if snap.Generation > c.generation() {
		c.reset(snap.Generation)
	}
	c.mu.Lock()
	if cat := c.current; cat != nil && cat.ext == snap.Extensions && cat.gen == c.gen {
		c.mu.Unlock()
		return cat, nil
	}
	p := c.inflight
	if p == nil {
		p = &pass{done: make(chan struct{})}
		c.inflight = p
		c.wg.Add(1)
		go c.run(p, snap)
	}
	c.mu.Unlock()
	select {
	case <-p.done:
		if p.err != nil {
			return nil, p.err
		}
		// A pass that started before a newer config or generation answers
		// with what it had; the next lookup starts a fresh pass.
		return p.cat, nil
	case <-ctx.Done():
		return nil, bus.Wrap(bus.CodeUpstreamTimeout, ctx.Err(), "tool discovery did not finish in time")
	}
}

func (c *cache) generation() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// run performs one discovery pass in the background: servers whose cache
// entry is missing or stale are discovered concurrently, each under its own
// session_init_timeout.
func (c *cache) run(p *pass, snap sharedstate.Snapshot) {
	defer c.wg.Done()
	defer close(p.done)
	ext := snap.Extensions
	enabled := ext.Enabled()
	interceptors := ext.InterceptorsFingerprint()

	c.mu.Lock()
	gen := c.gen
	todo := make([]*config.Server, 0, len(enabled))
	for _, srv := range enabled {
		if e, ok := c.entries[srv.Name]; !ok || e.fingerprint != srv.Fingerprint || e.interceptors != interceptors {
			todo = append(todo, srv)
		}
	}
	c.mu.Unlock()

	type result struct {
		srv   *config.Server
		tools []mcpclient.Tool
		err   error
	}
	results := make(chan result, len(todo))
	for _, srv := range todo {
		go func() {
			tools, err := discoverServer(srv, c.log)
			results <- result{srv, tools, err}
		}()
	}
	fresh := map[string]*entry{}
	failed := map[string]string{}
	for range todo {
		r := <-results
		if r.err != nil {
			failed[r.srv.Name] = bus.AsError(r.err).Message
			c.log.Warn("server discovery failed", observability.Server(r.srv.Name), observability.Err(r.err))
			continue
		}
		fresh[r.srv.Name] = &entry{fingerprint: r.srv.Fingerprint, interceptors: interceptors, tools: r.tools, discoveredAt: time.Now().UTC()}
		c.log.Info("server discovered", observability.Server(r.srv.Name), "tools", len(r.tools))
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight = nil
	if c.gen != gen {
		// A reset happened during the pass: its results belong to the old
		// generation. Publish nothing; the caller's next lookup retries.
		p.err = bus.Errorf(bus.CodeUnavailable, "the tool cache was reset during discovery; retry")
		return
	}
	// Keep only enabled servers; failed ones lose their old entry.
	keep := map[string]*entry{}
	for _, srv := range enabled {
		if e, ok := fresh[srv.Name]; ok {
			keep[srv.Name] = e
		} else if _, bad := failed[srv.Name]; !bad {
			if e, ok := c.entries[srv.Name]; ok {
				keep[srv.Name] = e
			}
		}
	}
	c.entries = keep
	c.failures = failed
	if len(enabled) > 0 && len(failed) == len(enabled) {
		p.err = bus.Errorf(bus.CodeUnavailable, "every enabled MCP server failed discovery (%d); nothing was published", len(failed))
		c.current = nil
		return
	}
	cat := buildCatalog(ext, gen, keep, failed, c.log)
	c.current = cat
	p.cat = cat
	if cat.hash != c.lastHash {
		c.lastHash = cat.hash
		if c.onEvent != nil {
			go c.onEvent(gen, cat.hash)
		}
	}
}
