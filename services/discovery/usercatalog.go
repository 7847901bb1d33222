package discovery

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
)

// userCatalog returns user's catalog: the deployment catalog of snap, then
// the tools of the user's enabled personal connections (prefixed with their
// runtime names; a name a deployment server already has stays the
// deployment server's). The deployment part follows get's rules, so it is
// unavailable exactly when the deployment catalog is. The personal part
// never fails the lookup: connections that cannot be read or discovered are
// reported in failed_servers.
func (c *cache) userCatalog(ctx context.Context, snap sharedstate.Snapshot, user string) (*catalog, error) {
	for range maxPassRetries {
		base, err := c.get(ctx, snap)
		if err != nil {
			return nil, err
		}
		pctx, cancel := personalBudget(ctx)
		cat, retry := c.personalCatalog(pctx, base, user)
		cancel()
		if !retry {
			return cat, nil
		}
	}
	return nil, bus.Errorf(bus.CodeUnavailable, "the tool cache kept being reset during discovery; retry")
}

// publishedFor is published for a user: the catalog already built for them
// on the published deployment catalog (the deployment catalog itself when
// they have no personal connection), or nil.
func (c *cache) publishedFor(snap sharedstate.Snapshot, user string) *catalog {
	base := c.published(snap)
	if base == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.users[user]
	now := time.Now()
	if s == nil || s.stale || now.Sub(s.fetched) >= c.pc.ttl {
		return nil
	}
	s.used = now
	switch {
	case s.empty():
		return base
	case s.base == base && s.cat != nil:
		return s.cat
	}
	return nil
}

// personalCatalog adds user's personal connections to base. Each is
// discovered like a deployment server (same cache, keyed by runtime name
// with the user as owner) and waited for until ctx ends; one still running
// is reported as failed for this lookup and goes on in the background.
// retry is true when the generation moved past base.
func (c *cache) personalCatalog(ctx context.Context, base *catalog, user string) (cat *catalog, retry bool) {
	set, err := c.personalSetFor(ctx, user)
	if err != nil {
		return base.withFailed(bus.FailedServer{Server: personalConnectionsServer, Error: bus.AsError(err).Message}), false
	}
	if set.empty() {
		return base, false
	}

	c.mu.Lock()
	if set.base == base && set.cat != nil {
		c.mu.Unlock()
		return set.cat, false
	}
	gen := c.gen
	if base.gen != gen {
		c.mu.Unlock()
		return nil, true
	}
	chain := base.ext.InterceptorsFingerprint()
	cached := map[string]*entry{}
	waits := map[string]*inFlight{}
	for _, srv := range set.servers {
		if e := c.entries[srv.Name]; e.matches(srv, chain) && e.owner == user {
			cached[srv.Name] = e
			continue
		}
		waits[srv.Name] = c.flightLocked(srv, chain, gen, user)
	}
	c.mu.Unlock()

	complete := true
	for _, f := range waits {
		select {
		case <-f.done():
		case <-ctx.Done():
			complete = false
		}
		if !complete {
			break
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return nil, true
	}
	servers := slices.Clone(base.servers)
	for i := range servers {
		if state := set.states[servers[i].srv.Name]; state != "" && perUserAccounts(servers[i].srv) {
			servers[i].connection = state
		}
	}
	failed := append(slices.Clone(base.failed), set.failed...)
	for _, srv := range set.servers {
		label := set.labels[srv.Name]
		var st serverTools
		if e, ok := cached[srv.Name]; ok {
			st = serverTools{srv: srv, tools: e.tools, digests: e.digests, era: e.era, fed: e.fed, personal: true}
		} else {
			f := waits[srv.Name]
			select {
			case <-f.done():
			default:
				failed = append(failed, bus.FailedServer{Server: srv.Name, Error: fmt.Sprintf(
					"personal connection '%s': MCP server '%s' discovery did not finish before the request's deadline; it goes on in the background", label, srv.Name)})
				continue
			}
			d, err := f.result()
			if err != nil {
				failed = append(failed, bus.FailedServer{Server: srv.Name, Error: fmt.Sprintf("personal connection '%s': %s", label, bus.AsError(err).Message), Code: failedCode(bus.AsError(err).Code)})
				continue
			}
			st = serverTools{srv: srv, tools: d.tools, digests: d.digests, era: d.era, fed: d.fed, personal: true}
		}
		// A task toolset naming a tool the server lacks fails that
		// connection only, never the user's catalog.
		if err := checkTaskTools([]serverTools{st}); err != nil {
			failed = append(failed, bus.FailedServer{Server: srv.Name, Error: fmt.Sprintf("personal connection '%s': %s", label, bus.AsError(err).Message)})
			continue
		}
		servers = append(servers, st)
	}
	cat, err = buildCatalog(base.ext, gen, servers, failed, c.ts, c.log)
	if err != nil {
		// Every server passed checkTaskTools; keep the deployment catalog.
		return base.withFailed(bus.FailedServer{Server: personalConnectionsServer, Error: bus.AsError(err).Message}), false
	}
	if complete && c.users[user] == set && !set.stale {
		set.base, set.cat = base, cat
	}
	return cat, false
}

// personalBudget bounds the wait for a user's personal part so the
// deployment catalog can still be answered before the request's deadline:
// it ends a fifth of the remaining time (at most a second) early.
func personalBudget(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := min(time.Until(dl)/5, time.Second)
	return context.WithDeadline(ctx, dl.Add(-margin))
}
