package discovery

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/coalesce"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// An upstream's notifications/{tools,prompts,resources}/list_changed,
// seen by whichever toolcall replica holds a session to it, arrives here
// as a bus.RediscoverRequest on mcpbus.internal.discovery.rediscover
// (every replica, a plain subscription). Each replica rediscovers that
// server alone (for a personal connection, in its owner's catalog only):
// a new discovery in the current generation, whose result replaces the
// server's entry (its previous tools are served until then; a failure
// marks it failed, as any discovery does), then the catalog is built
// again and, when it changed, announced with a CatalogEvent naming the
// server and the lists (and the user, for a personal connection). The
// generation is not raised: it counts resets. Requests are coalesced per
// server and owner (pkg/coalesce): one rediscovery at a time, at least
// rediscoverEvery apart, every request arriving meanwhile folded into
// the next one, so an upstream flooding list_changed costs one discovery
// per interval.

// rediscoverEvery is the least time between two rediscoveries of one
// server (and owner) after its list_changed.
const rediscoverEvery = time.Second

// rediscoverKey is a server and, for a personal connection, its owner.
type rediscoverKey struct{ server, owner string }

// newRediscoverer returns the coalescer of rediscovery requests.
func (s *Service) newRediscoverer() *coalesce.Group[rediscoverKey] {
	return coalesce.New(rediscoverEvery, func(ctx context.Context, k rediscoverKey, lists []string) {
		s.rediscover(ctx, k, lists)
	})
}

// onRediscover handles mcpbus.internal.discovery.rediscover.
func (s *Service) onRediscover(m *nats.Msg) {
	var req bus.RediscoverRequest
	if err := json.Unmarshal(m.Data, &req); err != nil || req.Server == "" {
		s.log.Warn("ignoring a malformed rediscovery request")
		return
	}
	lists := slices.DeleteFunc(slices.Clone(req.Lists), func(l string) bool {
		return l != bus.ListTools && l != bus.ListPrompts && l != bus.ListResources
	})
	if !s.rediscoverer.Trigger(rediscoverKey{server: req.Server, owner: req.UserID}, lists...) {
		s.deps.Metrics.ListChanged.WithLabelValues(req.Server, "coalesced").Inc()
	}
}

// rediscover runs one coalesced rediscovery and announces its catalog.
func (s *Service) rediscover(ctx context.Context, k rediscoverKey, lists []string) {
	var (
		cat     *catalog
		changed bool
		err     error
	)
	if k.owner == "" {
		cat, changed, err = s.cache.rediscoverServer(ctx, k.server)
	} else {
		cat, changed, err = s.rediscoverPersonal(ctx, k.server, k.owner)
	}
	outcome := "rediscovered"
	switch {
	case err != nil:
		outcome = "failed"
		s.log.Warn("rediscovery after list_changed failed", observability.Server(k.server), observability.Err(err))
	case cat == nil:
		// Not a server of this replica's catalog (yet): its first lookup
		// discovers it afresh anyway.
		return
	}
	s.deps.Metrics.ListChanged.WithLabelValues(k.server, outcome).Inc()
	// A tools change shows in the revision; prompts and resources are
	// announced whenever they were named.
	if cat == nil || (!changed && !slices.ContainsFunc(lists, func(l string) bool { return l != bus.ListTools })) {
		return
	}
	s.log.Info("catalog changed after an upstream's list_changed", observability.Server(k.server), "lists", strings.Join(lists, ","))
	s.publishListChanged(cat, k, lists)
}

// publishListChanged announces cat after server's list_changed.
func (s *Service) publishListChanged(cat *catalog, k rediscoverKey, lists []string) {
	ev := bus.CatalogEvent{Generation: cat.gen, CatalogHash: cat.hash, Revision: cat.revision, Server: k.server, Lists: lists, UserID: k.owner}
	s.publishEvent(ev, ":changed:"+k.server+":"+k.owner+":"+strings.Join(lists, ","))
}

// waitFlight waits for a discovery, or returns ctx's error.
func waitFlight(ctx context.Context, f *inFlight) error {
	select {
	case <-f.done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rediscoverServer rediscovers the deployment server named server in the
// current generation and builds the catalog again. cat is nil when the
// server is not an enabled server of the latest configuration; changed
// says the catalog's revision moved.
func (c *cache) rediscoverServer(ctx context.Context, server string) (cat *catalog, changed bool, err error) {
	c.mu.Lock()
	ext, gen := c.lastExt, c.gen
	var srv *config.Server
	if ext != nil {
		if i := slices.IndexFunc(ext.Enabled(), func(s *config.Server) bool { return s.Name == server }); i >= 0 {
			srv = ext.Enabled()[i]
		}
	}
	if srv == nil || c.life.Err() != nil {
		c.mu.Unlock()
		return nil, false, nil
	}
	prev := c.current
	c.rounds[server]++
	f := c.flightLocked(srv, ext.InterceptorsFingerprint(), gen, "")
	c.mu.Unlock()
	if err := waitFlight(ctx, f); err != nil {
		return nil, false, err
	}
	_, derr := f.result()
	// A fresh pass (not one that may have read the entries before this
	// discovery stored its result).
	p, err := c.passes.Replace(c.life, passKey{ext, gen}, func(ctx context.Context, _ func() bool) (passResult, error) {
		cat, retry, err := c.pass(ctx, ext, false)
		return passResult{cat: cat, retry: retry}, err
	}).Wait(ctx)
	if err != nil || p.retry || p.cat == nil {
		return nil, false, err
	}
	return p.cat, prev == nil || prev.revision != p.cat.revision, derr
}

// rediscoverPersonal rediscovers owner's personal connection named server
// (its runtime name) and builds owner's catalog again. cat is nil when
// this replica does not hold owner's connections or the connection is
// not among them.
func (s *Service) rediscoverPersonal(ctx context.Context, server, owner string) (cat *catalog, changed bool, err error) {
	c := s.cache
	c.mu.Lock()
	set := c.users[owner]
	var srv *config.Server
	if set != nil {
		if i := slices.IndexFunc(set.servers, func(s *config.Server) bool { return s.Name == server }); i >= 0 {
			srv = set.servers[i]
		}
	}
	if srv == nil || c.lastExt == nil || c.life.Err() != nil {
		c.mu.Unlock()
		return nil, false, nil
	}
	prev := set.cat
	c.rounds[server]++
	f := c.flightLocked(srv, c.lastExt.InterceptorsFingerprint(), c.gen, owner)
	c.mu.Unlock()
	if err := waitFlight(ctx, f); err != nil {
		return nil, false, err
	}
	_, derr := f.result()
	c.mu.Lock()
	if c.users[owner] == set {
		set.base, set.cat = nil, nil // built again below
	}
	c.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cat, err = c.userCatalog(rctx, s.watcher.Current(), owner)
	if err != nil {
		return nil, false, err
	}
	return cat, prev == nil || prev.revision != cat.revision, derr
}
