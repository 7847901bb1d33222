package toolcall

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// resolver maps visible names to catalog entries, cached per generation and
// catalog hash; a catalog event or a newer generation invalidates it.
type resolver struct {
	nc *nats.Conn

	mu    sync.Mutex
	gen   int64
	tools map[string]bus.Tool
	fresh bool
}

func (r *resolver) invalidate() {
	r.mu.Lock()
	r.fresh = false
	r.mu.Unlock()
}

// resolve finds name, fetching the catalog when the cached one is stale or
// does not know the name.
func (r *resolver) resolve(ctx context.Context, name string, gen int64) (bus.Tool, error) {
	r.mu.Lock()
	if r.fresh && r.gen >= gen {
		if t, ok := r.tools[name]; ok {
			r.mu.Unlock()
			return t, nil
		}
	}
	r.mu.Unlock()
	cat, err := bus.Request[bus.ToolsListReply](ctx, r.nc, bus.SubjectInternalCatalog, bus.ToolsListRequest{})
	if err != nil {
		return bus.Tool{}, err
	}
	tools := make(map[string]bus.Tool, len(cat.Tools))
	for _, t := range cat.Tools {
		tools[t.Name] = t
	}
	r.mu.Lock()
	r.gen, r.tools, r.fresh = cat.Generation, tools, true
	r.mu.Unlock()
	t, ok := tools[name]
	if !ok {
		return bus.Tool{}, bus.Errorf(bus.CodeNotFound, "tool '%s' is not in the catalog", name)
	}
	return t, nil
}
