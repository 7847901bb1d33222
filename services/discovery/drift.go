package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
)

// interceptorsKey names the interceptor chain in drift messages.
const interceptorsKey = "mcpInterceptors"

// driftGuard is the seed's startup-snapshot guard for durable task servers:
// the background poller keeps calling the endpoints it started with, so a
// task-enabled server's connection, authentication, transport or timeouts
// (and mcpInterceptors while task servers exist) may not change until
// restart. Description, routing, tool overrides and the name prefix stay
// hot, as do servers without task toolsets.
//
// The baseline is deployment-wide, not per process: a published config
// that carries its startup baseline (sharedstate.ConfigRecord: the file
// owner's startup publication, or the one a later publication of the same
// running owner carries) is judged against that baseline, so every replica
// agrees whatever order the services started in, and the api's start with
// an edited file is the restart that makes it the new baseline. A record
// that carries none (an older publisher) is judged against the snapshot
// this guard holds: the newest baseline seen, else the first configuration
// the service ran with (see start).
//
// The snapshot holds hashes only, never configuration values.
type driftGuard struct {
	mu      sync.Mutex
	base    map[string]string // nil until start
	waiting bool              // the next offered config becomes the snapshot
}

// start records ext as the startup snapshot, once.
func (g *driftGuard) start(ext *config.Extensions) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.base == nil {
		g.base = taskSnapshot(ext)
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
		g.base = taskSnapshot(ext)
		g.waiting = false
	}
}

// adopt makes a published baseline the snapshot for records that carry
// none.
func (g *driftGuard) adopt(baseline *config.Extensions) {
	snap := taskSnapshot(baseline)
	g.mu.Lock()
	g.base, g.waiting = snap, false
	g.mu.Unlock()
}

// check compares snap's config with its published baseline, or with the
// startup snapshot when it carries none, and returns a config_error naming
// every server that drifted, or nil. With neither it passes.
func (g *driftGuard) check(snap sharedstate.Snapshot) error {
	var base map[string]string
	if snap.Baseline != nil {
		if snap.Baseline == snap.Extensions {
			return nil // a startup publication is its own baseline
		}
		base = taskSnapshot(snap.Baseline)
	} else {
		g.mu.Lock()
		base = g.base
		g.mu.Unlock()
	}
	if base == nil {
		return nil
	}
	cur := taskSnapshot(snap.Extensions)
	var names []string
	for name := range joinKeys(base, cur) {
		if name != interceptorsKey && base[name] != cur[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if base[interceptorsKey] != cur[interceptorsKey] {
		names = append(names, interceptorsKey)
	}
	if len(names) == 0 {
		return nil
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	return bus.Errorf(bus.CodeConfigError,
		"MCP task-enabled server configuration changed after startup (%s); restart mcpbus before using durable task tools (in a split deployment at least the api service that owns the config file: its start publishes the file as the new startup configuration)",
		strings.Join(quoted, ", "))
}

// taskSnapshot hashes, per enabled task server, every field but description,
// routing, tools and tool_name_prefix, plus the interceptor chain when any
// task server exists.
func taskSnapshot(ext *config.Extensions) map[string]string {
	out := map[string]string{}
	for _, s := range ext.Enabled() {
		if s.TaskEnabled() {
			out[s.Name] = frozenHash(s)
		}
	}
	if len(out) > 0 {
		out[interceptorsKey] = ext.InterceptorsFingerprint()
	}
	return out
}

// frozenHash is the SHA-256 of the fields a running task server may not
// change: connection, authentication, transport, timeouts, toolsets, cwd
// and any unknown key.
func frozenHash(s *config.Server) string {
	b, err := json.Marshal(map[string]any{
		"type": s.Type, "command": s.Command, "args": s.Args, "env": s.Env,
		"url": s.URL, "headers": s.Headers, "oauth": s.OAuth,
		"tool_call_timeout": s.ToolCallTimeout, "session_init_timeout": s.SessionInitTimeout,
		"task_toolsets": s.TaskToolsets, "cwd": s.Cwd,
		"headers_from_context": s.HeadersFromContext, "user_auth": s.UserAuth,
		"extra": s.Extra,
	})
	if err != nil {
		// Every field is plain data; this cannot happen. Make the server
		// look changed rather than unchanged.
		return fmt.Sprintf("unencodable: %v", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func joinKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range maps.Keys(a) {
		out[k] = true
	}
	for k := range maps.Keys(b) {
		out[k] = true
	}
	return out
}
