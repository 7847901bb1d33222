package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/flight"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// personalConnectionsServer is the failed_servers name under which a user's
// lookup reports that their personal connections could not be read (the api
// did not answer): the deployment catalog is served without them.
const personalConnectionsServer = "personal-connections"

// keyUser is the log attribute of a user id.
const keyUser = "user_id"

// personalFetchFunc reads one user's personal connections (the api answers
// mcpbus.internal.personal).
type personalFetchFunc func(ctx context.Context, user string) (bus.PersonalServersReply, error)

// accountStatesFunc reads the per-user deployment servers on which a
// user's account is not connected, with their state (the tokens service
// answers mcpbus.internal.oauth.account_states).
type accountStatesFunc func(ctx context.Context, user string) (map[string]string, error)

// personalConfig bounds the reads of personal connections.
type personalConfig struct {
	timeout time.Duration // one read
	ttl     time.Duration // reuse of a read without a change event
	idle    time.Duration // a user not looked up this long is forgotten
}

// personalSet is one user's personal connections as the api last gave
// them, parsed. servers, failed, names and labels are immutable; the rest is
// guarded by cache.mu.
type personalSet struct {
	user    string
	servers []*config.Server   // enabled, in the reply's order (by name)
	failed  []bus.FailedServer // connections whose definition does not parse
	names   map[string]bool    // every runtime name of the reply
	labels  map[string]string  // runtime name → the user's name for it
	// states are the user's accounts not connected on per-user
	// deployment servers (server → needs_auth or error), shown on
	// those servers' tools in the user's catalog.
	states  map[string]string
	fetched time.Time

	used  time.Time
	stale bool // a change event arrived: read again before use
	// base and cat memoise the user's catalog built on the deployment
	// catalog base (only when every personal discovery finished).
	base, cat *catalog
}

// empty reports a set that adds nothing to the deployment catalog.
func (s *personalSet) empty() bool {
	return len(s.servers) == 0 && len(s.failed) == 0 && len(s.states) == 0
}

// parsePersonal turns the api's reply into a set. A connection whose
// definition does not parse is listed as failed (naming the connection),
// never silently dropped.
func parsePersonal(user string, reply bus.PersonalServersReply, now time.Time) (*personalSet, error) {
	set := &personalSet{user: user, names: map[string]bool{}, labels: map[string]string{}, fetched: now, used: now}
	doc, err := reply.ExtensionsJSON()
	if err != nil {
		return nil, bus.Wrap(bus.CodeInternal, err, "cannot read the personal connections")
	}
	ext, err := config.ParseExtensions("personal connections", doc)
	if err != nil {
		return nil, bus.Errorf(bus.CodeConfigError, "the personal connections do not parse")
	}
	problems := map[string][]string{}
	for _, p := range ext.Problems {
		if p.Severity == config.SeverityError && p.Server != "" {
			msg := p.Message
			if p.Field != "" {
				msg = p.Field + ": " + msg
			}
			problems[p.Server] = append(problems[p.Server], msg)
		}
	}
	for _, ps := range reply.Servers {
		if set.names[ps.RuntimeName] {
			continue
		}
		set.names[ps.RuntimeName] = true
		set.labels[ps.RuntimeName] = ps.Name
		srv := ext.Server(ps.RuntimeName)
		switch {
		case srv == nil:
			msg := fmt.Sprintf("personal connection '%s' (MCP server '%s') has an invalid definition", ps.Name, ps.RuntimeName)
			if p := problems[ps.RuntimeName]; len(p) > 0 {
				msg += ": " + p[0]
			}
			set.failed = append(set.failed, bus.FailedServer{Server: ps.RuntimeName, Error: msg})
		case srv.Enabled:
			set.servers = append(set.servers, srv)
		}
	}
	return set, nil
}

// personalSetFor returns user's personal connections: the cached set unless
// a change event made it stale or it is older than the TTL, else one read
// shared by every concurrent lookup of that user. It waits at most until
// ctx ends.
func (c *cache) personalSetFor(ctx context.Context, user string) (*personalSet, error) {
	c.mu.Lock()
	now := time.Now()
	if s := c.users[user]; s != nil && !s.stale && now.Sub(s.fetched) < c.pc.ttl {
		s.used = now
		c.mu.Unlock()
		return s, nil
	}
	gen := c.gen
	f, _ := c.userFetches.Start(c.life, user, func(ctx context.Context, current func() bool) (*personalSet, error) {
		return c.readPersonal(ctx, user, gen, current)
	})
	c.mu.Unlock()
	set, err := f.Wait(ctx)
	if flight.WaitEnded(err) {
		return nil, bus.Wrap(bus.CodeUpstreamTimeout, ctx.Err(), "your personal MCP connections could not be read before the request's deadline")
	}
	return set, err
}

// readPersonal asks the api for user's connections and stores the set,
// unless a change event or a newer generation came in the meantime (its
// waiters still get it; the next lookup reads again).
func (c *cache) readPersonal(ctx context.Context, user string, gen int64, current func() bool) (*personalSet, error) {
	ctx, cancel := context.WithTimeout(ctx, c.pc.timeout)
	reply, err := c.fetchPersonal(ctx, user)
	cancel()
	var set *personalSet
	switch {
	case err != nil:
		e := bus.AsError(err)
		err = bus.Wrap(e.Code, err, "your personal MCP connections could not be read: "+e.Message)
	case reply.UserID != user:
		// Never show anyone else's connections.
		err = bus.Errorf(bus.CodeInternal, "your personal MCP connections could not be read: the reply was for another user")
	default:
		set, err = parsePersonal(user, reply, time.Now())
	}
	if set != nil {
		set.states = c.accountStates(ctx, user)
	}
	c.mu.Lock()
	// Under c.mu, as invalidatePersonal forgets a read: the result and the
	// end of the read together.
	if current() {
		c.userFetches.Forget(user)
		if set != nil && c.gen == gen {
			c.storePersonalLocked(set)
		}
	}
	warn, suppressed := false, 0
	if err != nil {
		now := time.Now()
		if now.Sub(c.personalWarn.last) >= personalWarnEvery {
			warn, suppressed = true, c.personalWarn.suppressed
			c.personalWarn.last, c.personalWarn.suppressed = now, 0
		} else {
			c.personalWarn.suppressed++
		}
	}
	c.mu.Unlock()
	if warn {
		c.log.Warn("personal connections unavailable; serving the deployment catalog without them", slog.String(keyUser, user),
			observability.Err(err), slog.Int("same_warnings_suppressed", suppressed))
	}
	return set, err
}

// personalWarnEvery is the least time between two warnings that personal
// connections could not be read (every lookup still tries again).
const personalWarnEvery = 30 * time.Second

// storePersonalLocked records set as its user's connections, forgets users
// not looked up for pc.idle, and drops (or, in flight, cancels) the
// discoveries of personal connections no remembered user has any more
// (edited or deleted ones: an edit gives a new runtime name). c.mu must be
// held.
func (c *cache) storePersonalLocked(set *personalSet) {
	c.users[set.user] = set
	for u, s := range c.users {
		if set.fetched.Sub(s.used) > c.pc.idle {
			delete(c.users, u)
		}
	}
	live := func(owner, name string) bool {
		s := c.users[owner]
		return s != nil && s.names[name]
	}
	for name, e := range c.entries {
		if e.owner != "" && !live(e.owner, name) {
			delete(c.entries, name)
		}
	}
	for name, f := range c.failures {
		if f.owner != "" && !live(f.owner, name) {
			delete(c.failures, name)
		}
	}
	// A discovery nobody can use any more ends now, closing its
	// connection (a tarpit must not hold it until session_init_timeout).
	for name, f := range c.flights {
		if f.key.owner != "" && !live(f.key.owner, name) {
			f.call.Cancel()
		}
	}
}

// invalidatePersonal marks user's connections stale (a change event): the
// next lookup reads them again, and a read in flight is not stored. The
// discoveries stay: a runtime name derives from the whole definition, so an
// unchanged connection keeps its entry.
func (c *cache) invalidatePersonal(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.users[user]; s != nil {
		s.stale = true
	}
	c.userFetches.Forget(user)
}

// invalidateAllPersonal marks every user's connections stale.
func (c *cache) invalidateAllPersonal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.users {
		s.stale = true
	}
	c.userFetches.ForgetAll()
}

// onPersonalEvent handles mcpbus.events.personal.<user>: the body carries
// the exact user id; one that cannot be read invalidates every user.
func (s *Service) onPersonalEvent(m *nats.Msg) {
	var ev bus.PersonalServersRequest
	if err := json.Unmarshal(m.Data, &ev); err != nil || ev.UserID == "" {
		s.log.Warn("unreadable personal connection event; dropping every user's personal connections", "subject", m.Subject)
		s.cache.invalidateAllPersonal()
		return
	}
	s.cache.invalidatePersonal(ev.UserID)
}

// accountStates is user's accounts not connected on the per-user
// deployment servers of the latest configuration (nil when there is none,
// or the tokens service did not answer: the tools then carry no state).
func (c *cache) accountStates(ctx context.Context, user string) map[string]string {
	c.mu.Lock()
	ext := c.lastExt
	c.mu.Unlock()
	if c.fetchStates == nil || ext == nil || !slices.ContainsFunc(ext.Enabled(), perUserAccounts) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.pc.timeout)
	defer cancel()
	states, err := c.fetchStates(ctx, user)
	if err != nil {
		c.log.Debug("cannot read a user's account states; their tools show none", observability.Err(err))
		return nil
	}
	return states
}

// perUserAccounts reports a server whose accounts each user connects.
func perUserAccounts(srv *config.Server) bool {
	return srv.ConnectsAccounts() && srv.OAuth.Connect != config.ConnectShared
}

// askAccountStates reads a user's account states from the tokens service.
func (s *Service) askAccountStates(ctx context.Context, user string) (map[string]string, error) {
	reply, err := bus.Request[bus.OAuthAccountStatesReply](ctx, s.deps.NC, s.deps.Names.InternalOAuthAccountStates(), bus.OAuthAccountStatesRequest{UserID: user})
	if err != nil {
		return nil, err
	}
	if reply.UserID != user {
		return nil, bus.Errorf(bus.CodeInternal, "the account states were for another user")
	}
	return reply.States, nil
}

// askPersonal reads a user's connections from the api.
func (s *Service) askPersonal(ctx context.Context, user string) (bus.PersonalServersReply, error) {
	return bus.Request[bus.PersonalServersReply](ctx, s.deps.NC, s.deps.Names.InternalPersonal(), bus.PersonalServersRequest{UserID: user})
}
