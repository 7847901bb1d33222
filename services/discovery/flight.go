package discovery

import (
	"context"
	"log/slog"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/flight"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// flightKey identifies one discovery: the same server configuration, chain
// and generation share a single upstream session.
type flightKey struct {
	server, fingerprint, interceptors, owner string
	gen                                      int64
	// round counts the server's rediscoveries after its list_changed
	// (rediscover.go): a new round is a new discovery in the same
	// generation.
	round uint64
}

// inFlight is one server's discovery in progress (the call of c.discoveries
// under key).
type inFlight struct {
	key  flightKey
	call *flight.Call[discovered]
	// refresh is set (under cache.mu) when it rediscovers a server whose
	// stale entry is served meanwhile: its end republishes the catalog
	// (refresh.go).
	refresh bool
}

// done is closed when the discovery has returned.
func (f *inFlight) done() <-chan struct{} { return f.call.Done() }

// result is what the discovery learnt (tools, era) or its error, once
// done is closed.
func (f *inFlight) result() (discovered, error) { return f.call.Result() }

// flightLocked returns the discovery of srv for (chain, gen), starting it
// unless one is already running. owner is the user of a personal
// connection ("" for a deployment server). c.mu must be held.
func (c *cache) flightLocked(srv *config.Server, chain string, gen int64, owner string) *inFlight {
	key := flightKey{server: srv.Name, fingerprint: srv.Fingerprint, interceptors: chain, owner: owner, gen: gen, round: c.rounds[srv.Name]}
	if f := c.flights[srv.Name]; f != nil && f.key == key {
		return f
	}
	f := &inFlight{key: key}
	// The discovery runs on c.life, not a caller's context; fly runs when
	// the call was started here (a call still running under the same key
	// is joined).
	f.call, _ = c.discoveries.Start(c.life, key, func(ctx context.Context, _ func() bool) (discovered, error) {
		return c.fly(ctx, f, srv)
	})
	c.flights[srv.Name] = f
	return f
}

// fly runs one discovery and stores its outcome, unless a newer discovery
// of the same server or a newer generation superseded it.
func (c *cache) fly(ctx context.Context, f *inFlight, srv *config.Server) (discovered, error) {
	start := time.Now()
	d, err := c.discover(ctx, srv, f.key.owner)
	if err == nil && c.pin != nil {
		d, err = c.pin(ctx, srv, f.key.owner, f.key.gen, d)
	}
	if err == nil && len(d.digests) != len(d.tools) {
		d.digests = digestsOf(d.tools)
	}
	tools := d.tools
	took := time.Since(start)

	stderr := mcpclient.StderrTail(err)
	c.mu.Lock()
	// Current unless a discovery of another key replaced it (one of the
	// same key joined this call).
	cur := c.flights[srv.Name]
	current := cur != nil && cur.key == f.key
	if current {
		delete(c.flights, srv.Name)
	}
	if current && c.gen == f.key.gen {
		now := c.now().UTC()
		if err == nil {
			c.entries[srv.Name] = &entry{owner: f.key.owner, fingerprint: f.key.fingerprint, interceptors: f.key.interceptors, gen: f.key.gen, tools: tools, digests: d.digests, discoveredAt: now,
				era: d.era, protocolVersion: d.protocolVersion, fed: d.fed}
			delete(c.failures, srv.Name)
		} else {
			// A failed server loses its previous entry; consecutive
			// failures of one configuration back off further.
			delete(c.entries, srv.Name)
			prev, n := c.failures[srv.Name], 1
			if prev.owner == f.key.owner && prev.fingerprint == f.key.fingerprint && prev.interceptors == f.key.interceptors {
				n = prev.count + 1
			}
			c.failures[srv.Name] = failure{owner: f.key.owner, fingerprint: f.key.fingerprint, interceptors: f.key.interceptors,
				message: bus.AsError(err).Message, code: bus.AsError(err).Code, stderr: stderr, at: now, count: n, nextRetry: now.Add(c.retry.after(n))}
		}
	}
	refreshed := current && f.refresh && c.gen == f.key.gen
	c.mu.Unlock()
	if refreshed {
		c.republish(srv.Name, f.key.gen)
	}

	if err != nil {
		c.log.Warn("server discovery failed", observability.Server(srv.Name), "transport", srv.Type, "duration", took, observability.Err(err), slog.String("stderr", stderr))
	} else {
		c.log.Info("server discovered", observability.Server(srv.Name), "transport", srv.Type, "tools", len(tools), "era", string(d.era), "protocol_version", d.protocolVersion, "duration", took)
	}
	return d, err
}
