package discovery

import (
	"sync"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
)

// driftGuard holds back the task-enabled servers whose durable tasks
// depend on a definition that changed since the deployment started: the
// background poller keeps calling the endpoint a task was submitted to, so
// such a server's restart fields (config.RestartFields, and mcpInterceptors)
// may not change until restart. Only those servers are held back, with the
// reason (config.TaskDrift); every other server keeps serving, and a server
// disabled, removed or added since startup is never held.
//
// The baseline is deployment-wide, not per process: a published config
// that carries its startup baseline (sharedstate.ConfigRecord: the file
// owner's startup publication, or the one a later publication carries) is
// judged against that baseline, so every replica agrees whatever order the
// services started in, and the api's start with an edited file is the
// restart that makes it the new baseline. A record that carries none (an
// older publisher) is judged against the snapshot this guard holds: the
// newest baseline seen, else the first configuration the service ran with
// (see start).
type driftGuard struct {
	mu      sync.Mutex
	base    *config.Extensions // nil until start
	waiting bool               // the next offered config becomes the snapshot
}

// start records ext as the startup snapshot, once.
func (g *driftGuard) start(ext *config.Extensions) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.base == nil {
		g.base = ext
	}
}

// await makes the next offered configuration the startup snapshot (the
// service started before any configuration existed).
func (g *driftGuard) await() {
	g.mu.Lock()
	g.waiting = g.base == nil
	g.mu.Unlock()
}

// offer records ext as the snapshot when the guard awaits one.
func (g *driftGuard) offer(ext *config.Extensions) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.waiting && g.base == nil {
		g.base = ext
		g.waiting = false
	}
}

// adopt makes a published baseline the snapshot for records that carry
// none.
func (g *driftGuard) adopt(baseline *config.Extensions) {
	g.mu.Lock()
	g.base, g.waiting = baseline, false
	g.mu.Unlock()
}

// held returns, per server of snap's config that is held back, why: the
// config_error message naming the server and the fields that changed.
// Nil when nothing drifted.
func (g *driftGuard) held(snap sharedstate.Snapshot) map[string]string {
	base := snap.Baseline
	if base == snap.Extensions {
		return nil // a startup publication is its own baseline
	}
	if base == nil {
		g.mu.Lock()
		base = g.base
		g.mu.Unlock()
	}
	var out map[string]string
	for _, d := range config.TaskDrifts(base, snap.Extensions) {
		if out == nil {
			out = map[string]string{}
		}
		out[d.Server] = d.Message()
	}
	return out
}
