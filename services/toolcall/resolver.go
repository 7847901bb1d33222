package toolcall

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// maxCachedUsers bounds the per-user caches (catalog maps and personal
// configs); past it, an arbitrary user's entry is dropped (it is read again
// on that user's next call).
const maxCachedUsers = 1024

// resolver maps visible names to catalog entries. The catalog is asked with
// the caller's user id (discovery adds that user's personal tools), so the
// map is cached per user and one user's map never answers for another. A
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

// userCatalog is one user's name → tool map and its generation.
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

// resolve finds name in user's catalog, fetching it when the cached one is
// older than gen or does not know the name. user is the caller's id as
// sent ("" asks for the deployment catalog only).
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
	cat, err := bus.ListCatalog(ctx, r.nc, r.names.InternalCatalog(), bus.ToolsListRequest{UserID: user})
	if err != nil {
		return bus.Tool{}, err
	}
	tools := make(map[string]bus.Tool, len(cat.Tools))
	for _, t := range cat.Tools {
		tools[t.Name] = t
	}
	r.mu.Lock()
	if r.epoch == epoch {
		if _, ok := r.users[user]; !ok && len(r.users) >= maxCachedUsers {
			for u := range r.users {
				delete(r.users, u)
				break
			}
		}
		r.users[user] = userCatalog{gen: cat.Generation, tools: tools}
	}
	r.mu.Unlock()
	t, ok := tools[name]
	if !ok {
		return bus.Tool{}, bus.Errorf(bus.CodeNotFound, "tool '%s' is not in the catalog", name)
	}
	return t, nil
}
