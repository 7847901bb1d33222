package toolcall

import (
	"context"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// maxCachedUsers bounds the per-user caches (catalog maps and personal
// configs); past it, an arbitrary user's entry is dropped (it is read again
// on that user's next call).
const maxCachedUsers = 1024

// maxCachedTools bounds one user's cached tools; past it, the user's map
// starts again.
const maxCachedTools = 4096

// resolver maps visible names to catalog entries, looked up one tool at a
// time. The catalog is asked with the caller's user id (discovery adds
// that user's personal tools), so the tools found are cached per user and one user's map never answers for another. A
// catalog event or a newer generation drops every map; a personal
// connection event drops that user's. Safe for concurrent use.
type resolver struct {
	nc    *nats.Conn
	names bus.Names

	mu    sync.Mutex
	users map[string]userCatalog // by caller user id ("" = no user)
	// epoch counts invalidations: a catalog read that started before one
	// is returned to its caller but not cached.
	epoch uint64
}

// userCatalog is the tools one user called (name → tool), of one
// generation.
type userCatalog struct {
	gen   int64
	tools map[string]bus.Tool
}

func newResolver(nc *nats.Conn, names bus.Names) *resolver {
	return &resolver{nc: nc, names: names, users: map[string]userCatalog{}}
}

// invalidate drops every user's map.
func (r *resolver) invalidate() {
	r.mu.Lock()
	r.users = map[string]userCatalog{}
	r.epoch++
	r.mu.Unlock()
}

// invalidateUser drops user's map.
func (r *resolver) invalidateUser(user string) {
	r.mu.Lock()
	delete(r.users, user)
	r.epoch++
	r.mu.Unlock()
}

// fresh is resolve from discovery's current catalog, whatever is cached.
func (r *resolver) fresh(ctx context.Context, user, name string) (bus.Tool, error) {
	r.invalidateUser(user)
	return r.resolve(ctx, user, name, 0)
}

// resolve finds name in user's catalog: the cached entry when the cached
// map is of gen or newer, else one lookup of that tool on discovery's
// catalog (bus.ToolsListRequest.Tool: one tool, whatever the catalog's
// size), which is then cached. user is the caller's id as sent (""
// asks for the deployment catalog only).
func (r *resolver) resolve(ctx context.Context, user, name string, gen int64) (bus.Tool, error) {
	r.mu.Lock()
	if c, ok := r.users[user]; ok && c.gen >= gen {
		if t, ok := c.tools[name]; ok {
			r.mu.Unlock()
			return t, nil
		}
	}
	epoch := r.epoch
	r.mu.Unlock()
	reply, err := bus.Request[bus.ToolsListReply](ctx, r.nc, r.names.InternalCatalog(), bus.ToolsListRequest{UserID: user, Tool: name})
	if err != nil {
		return bus.Tool{}, err
	}
	// One tool, or none; a discovery replica that predates lookups answers
	// with the whole catalog, searched here.
	i := slices.IndexFunc(reply.Tools, func(t bus.Tool) bool { return t.Name == name })
	if i < 0 {
		return bus.Tool{}, bus.Errorf(bus.CodeNotFound, "tool '%s' is not in the catalog", name)
	}
	t := reply.Tools[i]
	r.mu.Lock()
	if r.epoch == epoch {
		c, ok := r.users[user]
		if !ok && len(r.users) >= maxCachedUsers {
			for u := range r.users {
				delete(r.users, u)
				break
			}
		}
		if !ok || c.gen != reply.Generation || len(c.tools) >= maxCachedTools {
			c = userCatalog{gen: reply.Generation, tools: map[string]bus.Tool{}}
		}
		c.tools[name] = t
		r.users[user] = c
	}
	r.mu.Unlock()
	return t, nil
}
