package toolcall

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// personalReadTimeout bounds one read of a user's personal connections
// from the api (mcpbus.internal.personal).
const personalReadTimeout = 10 * time.Second

// keyUser is the log attribute of a user id.
const keyUser = "user_id"

// errNotYours is the error for a runtime name that is not one of the
// caller's enabled personal connections (another user's, an edited,
// disabled or deleted one, or any with no caller).
func errNotYours(runtime string) *bus.Error {
	return bus.Errorf(bus.CodeNotFound, "MCP server '%s' is not one of your personal connections", runtime)
}

// personalConfigs caches each user's personal connections, parsed, as the
// api last gave them. A personal connection event drops the user's entry;
// a runtime name missing from a cached entry is read again (the event may
// not have arrived yet). Safe for concurrent use.
type personalConfigs struct {
	nc    *nats.Conn
	names bus.Names

	mu    sync.Mutex
	users map[string]*config.Extensions // by user; servers named by runtime name
	// epoch counts invalidations: a read that started before one is used
	// by its caller but not cached.
	epoch uint64
}

func newPersonalConfigs(nc *nats.Conn, names bus.Names) *personalConfigs {
	return &personalConfigs{nc: nc, names: names, users: map[string]*config.Extensions{}}
}

// invalidate drops user's connections.
func (p *personalConfigs) invalidate(user string) {
	p.mu.Lock()
	delete(p.users, user)
	p.epoch++
	p.mu.Unlock()
}

// invalidateAll drops every user's connections.
func (p *personalConfigs) invalidateAll() {
	p.mu.Lock()
	p.users = map[string]*config.Extensions{}
	p.epoch++
	p.mu.Unlock()
}

// server returns user's enabled personal connection named runtime. It is
// not_found (errNotYours) when user is empty or has no such enabled
// connection; unavailable when the api cannot be read, so the caller may
// retry; never another user's.
func (p *personalConfigs) server(ctx context.Context, user, runtime string) (*config.Server, error) {
	if user == "" {
		return nil, errNotYours(runtime)
	}
	p.mu.Lock()
	ext, cached := p.users[user]
	epoch := p.epoch
	p.mu.Unlock()
	if cached {
		if srv := ext.Server(runtime); srv != nil && srv.Enabled {
			return srv, nil
		}
	}
	ext, err := p.read(ctx, user)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.epoch == epoch {
		if _, ok := p.users[user]; !ok && len(p.users) >= maxCachedUsers {
			for u := range p.users {
				delete(p.users, u)
				break
			}
		}
		p.users[user] = ext
	}
	p.mu.Unlock()
	if srv := ext.Server(runtime); srv != nil && srv.Enabled {
		return srv, nil
	}
	return nil, errNotYours(runtime)
}

// read asks the api for user's connections and parses them as an
// extensions document keyed by runtime name. Any failure to read is
// unavailable (retryable): the connections may well exist.
func (p *personalConfigs) read(ctx context.Context, user string) (*config.Extensions, error) {
	ctx, cancel := context.WithTimeout(ctx, personalReadTimeout)
	defer cancel()
	reply, err := bus.Request[bus.PersonalServersReply](ctx, p.nc, p.names.InternalPersonal(), bus.PersonalServersRequest{UserID: user})
	if err != nil {
		return nil, bus.Wrap(bus.CodeUnavailable, err, "your personal MCP connections could not be read: "+bus.AsError(err).Message)
	}
	if reply.UserID != user {
		// Never route to anyone else's connections.
		return nil, bus.Errorf(bus.CodeInternal, "your personal MCP connections could not be read: the reply was for another user")
	}
	doc, err := reply.ExtensionsJSON()
	if err != nil {
		return nil, bus.Wrap(bus.CodeInternal, err, "cannot read your personal MCP connections")
	}
	ext, err := config.ParseExtensions("personal connections", doc)
	if err != nil {
		return nil, bus.Wrap(bus.CodeConfigError, err, "your personal MCP connections do not parse")
	}
	return ext, nil
}

// personalServer resolves a personal runtime name for the caller and
// applies the personal launch policy again (the api checked it on save,
// perhaps under an older policy): a stdio connection the current policy
// refuses is config_error and nothing is spawned.
func (s *Service) personalServer(ctx context.Context, user, runtime string) (*config.Server, error) {
	srv, err := s.personal.server(ctx, user, runtime)
	if err != nil {
		return nil, err
	}
	if _, err := s.policy.Check(srv); err != nil {
		return nil, bus.WrapUser(bus.CodeConfigError, err, fmt.Sprintf("personal MCP server '%s' is refused by the launch policy", srv.Name))
	}
	// Its timeouts and response cap within the operator's maxima.
	return s.cfg.Upstream.Personal(srv), nil
}

// onPersonalEvent handles mcpbus.events.personal.<user>: it drops what is
// cached for the user (catalog map and personal configs) at once and queues
// a sweep of the user's sessions. A body that cannot be read drops every
// user's caches and queues a sweep of every personal session.
func (s *Service) onPersonalEvent(m *nats.Msg) {
	var ev bus.PersonalServersRequest
	if err := json.Unmarshal(m.Data, &ev); err != nil || ev.UserID == "" {
		s.log.Warn("unreadable personal connection event; dropping every user's personal connections", "subject", m.Subject)
		s.resolver.invalidate()
		s.personal.invalidateAll()
		s.sweeps.addAll()
		return
	}
	s.resolver.invalidateUser(ev.UserID)
	s.personal.invalidate(ev.UserID)
	s.sweeps.add(ev.UserID)
}

// sweepQueue holds the users whose personal sessions are to be swept. Safe
// for concurrent use.
type sweepQueue struct {
	mu    sync.Mutex
	users map[string]bool
	all   bool
	wake  chan struct{} // capacity 1
}

func newSweepQueue() *sweepQueue {
	return &sweepQueue{users: map[string]bool{}, wake: make(chan struct{}, 1)}
}

func (q *sweepQueue) add(user string) {
	q.mu.Lock()
	q.users[user] = true
	q.mu.Unlock()
	q.signal()
}

func (q *sweepQueue) addAll() {
	q.mu.Lock()
	q.all = true
	q.mu.Unlock()
	q.signal()
}

func (q *sweepQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take empties the queue.
func (q *sweepQueue) take() (users []string, all bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for u := range q.users {
		users = append(users, u)
	}
	users, all = slices.Sorted(slices.Values(users)), q.all
	q.users, q.all = map[string]bool{}, false
	return users, all
}

// sweepPersonal runs until ctx ends (Run owns and joins it): for each
// queued user it reads the user's connections again and closes the pooled
// sessions and chains of runtime names the user no longer has enabled (an
// edited, disabled or deleted connection), so the others keep their
// sessions and in-flight calls. When the connections cannot be read, every
// personal session of the user is closed; after an unreadable event, every
// personal session.
func (s *Service) sweepPersonal(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.sweeps.wake:
		}
		users, all := s.sweeps.take()
		if all {
			n := s.closePersonal(func(string, string) bool { return true })
			s.log.Info("personal connections changed; closed every personal session", "closed", n)
			continue
		}
		for _, user := range users {
			s.sweepUser(ctx, user)
		}
	}
}

func (s *Service) sweepUser(ctx context.Context, user string) {
	ext, err := s.personal.read(ctx, user)
	keep := func(server string) bool {
		if err != nil {
			return false
		}
		srv := ext.Server(server)
		return srv != nil && srv.Enabled
	}
	n := s.closePersonal(func(owner, server string) bool { return owner == user && !keep(server) })
	if err != nil {
		s.log.Warn("personal connections unreadable after a change; closed all of the user's personal sessions",
			slog.String(keyUser, user), "closed", n, observability.Err(err))
		return
	}
	s.log.Info("personal connections changed", slog.String(keyUser, user), "closed", n)
}

// closePersonal closes the personal sessions and drops the personal chains
// that match (owner, runtime name), and returns how many sessions it closed.
func (s *Service) closePersonal(match func(owner, server string) bool) int {
	keyMatch := func(k sessionKey) bool { return k.owner != "" && match(k.owner, k.server) }
	n := s.stdio.closeWhere(keyMatch) + s.remote.closeWhere(keyMatch)
	s.chains.pruneOwned(match)
	return n
}
