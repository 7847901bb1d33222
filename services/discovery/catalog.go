package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// visibleName is the rule every tool name an agent sees must satisfy.
var visibleName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// taskSubmitNote is appended to a task toolset's submit tool description.
const taskSubmitNote = "\n\nSubmitted as durable background task '%s'; returns an mcpbus task ID immediately and status polling is handled automatically."

// serverTools is one discovered server's raw tools, in config order.
type serverTools struct {
	srv   *config.Server
	tools []mcpclient.Tool
	// digests are the tools' digests, in order (nil: computed here).
	digests []string
	// personal is set for a server read from the user's personal
	// connections (never decided by its name): its tools say so to
	// toolcall (bus.Tool.Personal).
	personal bool
	// era is the protocol era discovery spoke to it in (bus.Tool.ServerEra).
	era mcpclient.Era
	// fed are its prompts, resources and templates (federation.go).
	fed fedLists
	// connection is the user's account state on a per-user server whose
	// account they have not connected (bus.Tool.Connection).
	connection string
}

// catalog is one published catalog. It is immutable once built; the
// encoded replies are computed once on first use.
type catalog struct {
	ext *config.Extensions
	gen int64
	ts  config.ToolSearch
	// servers are the discovered servers it was built from, so a user's
	// catalog can add their personal connections after them.
	servers []serverTools

	// all holds every tool with its routing data, the runtime-internal task
	// status and cancel tools included (for toolcall); agent omits those.
	all, agent []bus.Tool
	deferred   map[string]bool
	failed     []bus.FailedServer
	clashes    []bus.NameClash
	counts     map[string]int // tools listed per server
	// fed are the prompts, resources and templates (federation.go).
	fed *fedCatalog

	hash, revision, hints, deferredSection string

	// Computed once on first use (reply.go): each listing's encoded
	// unpaged reply and tool sizes, and failed_servers encoded.
	wholeOnce  [2]sync.Once
	wholeJSON  [2][]byte
	sizesOnce  sync.Once
	sizes      [2][]int
	failedOnce sync.Once
	failedJSON []byte
	// index maps each listing's visible names to their position, for a
	// lookup of one tool (reply.go lookup).
	indexOnce [2]sync.Once
	index     [2]map[string]int

	// views are the virtual servers' views of this catalog (virtual.go),
	// by set name (setView: the compiled set it was built for), built on
	// first use.
	views     sync.Map
	viewCount atomic.Int64
}

// buildCatalog flattens the discovered servers (config order, then each
// server's order) into a catalog: visible names (prefix, name rule, first
// server wins a clash), routing, task toolsets and tool_search deferral. A
// task server that answered without one of its configured raw tools is a
// config_error: nothing is published until the names match.
func buildCatalog(ext *config.Extensions, gen int64, servers []serverTools, failed []bus.FailedServer, ts config.ToolSearch, log *slog.Logger) (*catalog, error) {
	if err := checkTaskTools(servers); err != nil {
		return nil, err
	}
	cat := &catalog{ext: ext, gen: gen, ts: ts, servers: servers, all: []bus.Tool{}, agent: []bus.Tool{},
		deferred: map[string]bool{}, failed: nonNilFailed(failed), clashes: []bus.NameClash{}, counts: map[string]int{}}
	owner := map[string]string{}
	for _, st := range servers {
		srv := st.srv
		for i, t := range st.tools {
			name := t.Name
			if srv.ToolNamePrefix {
				name = srv.Name + "_" + t.Name
			}
			if !visibleName.MatchString(name) {
				log.Warn("tool dropped: invalid name", observability.Server(srv.Name), observability.Tool(t.Name), "visible_name", name)
				continue
			}
			if first, taken := owner[name]; taken {
				cat.clashes = append(cat.clashes, bus.NameClash{Name: name, Winner: first, Loser: srv.Name})
				log.Warn("tool name clash: the first server in config order wins", observability.Tool(name), "winner", first, "loser", srv.Name)
				continue
			}
			owner[name] = srv.Name
			var digest string
			if i < len(st.digests) {
				digest = st.digests[i]
			} else {
				digest = definitionOf(t).Digest()
			}
			bt := toBusTool(srv, name, t, digest)
			bt.Deferred = ts.Enabled
			bt.Personal = st.personal
			if st.personal && !srv.ToolNamePrefix {
				// A personal connection's URIs are always visible.
				bt.Meta = bus.RewriteToolMeta(srv.Name, t.Meta)
			}
			bt.ServerEra = string(st.era)
			bt.Connection = st.connection
			cat.all = append(cat.all, bt)
			if internalTaskTool(srv, t.Name) {
				continue
			}
			cat.agent = append(cat.agent, bt)
			cat.counts[srv.Name]++
			if bt.Deferred {
				cat.deferred[bt.Name] = true
			}
		}
	}
	cat.fed = buildFed(servers, log)
	cat.hash = catalogHash(cat.agent)
	cat.hints = routingHints(cat.agent)
	cat.deferredSection = deferredSection(cat.agent)
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(struct {
		Tools []bus.Tool `json:"tools"`
		Hints string     `json:"hints"`
	}{cat.all, cat.hints})
	cat.revision = hex.EncodeToString(h.Sum(nil))
	return cat, nil
}

// withFailed is c with more failed_servers entries (everything else
// shared, the encoded replies built again).
func (c *catalog) withFailed(extra ...bus.FailedServer) *catalog {
	return &catalog{ext: c.ext, gen: c.gen, ts: c.ts, servers: c.servers, all: c.all, agent: c.agent,
		deferred: c.deferred, failed: append(slices.Clone(c.failed), extra...), clashes: c.clashes, counts: c.counts, fed: c.fed,
		hash: c.hash, revision: c.revision, hints: c.hints, deferredSection: c.deferredSection}
}

func toBusTool(srv *config.Server, name string, t mcpclient.Tool, digest string) bus.Tool {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	out := bus.Tool{
		Name: name, Server: srv.Name, OriginalName: t.Name,
		Description: t.Description, InputSchema: schema,
		OutputSchema: t.OutputSchema, Annotations: t.Annotations,
		Routing:   effectiveRouting(srv, t.Name),
		Execution: t.Execution,
		Meta:      t.Meta,
		Digest:    digest,
		TimeoutMS: srv.ToolCallTimeout.Milliseconds(),
	}
	if srv.ToolNamePrefix {
		out.Meta = bus.RewriteToolMeta(srv.Name, t.Meta)
	}
	for _, ts := range srv.TaskToolsets {
		if ts.SubmitTool == t.Name {
			out.TaskToolset = ts.Name
			out.Description += fmt.Sprintf(taskSubmitNote, ts.Name)
		}
	}
	return out
}

// internalTaskTool reports a task status or cancel tool: runtime-internal,
// never offered to agents.
func internalTaskTool(srv *config.Server, raw string) bool {
	for _, ts := range srv.TaskToolsets {
		if raw == ts.StatusTool || raw == ts.CancelTool {
			return true
		}
	}
	return false
}

// checkTaskTools returns a config_error when a discovered task server lacks
// one of its configured raw tools.
func checkTaskTools(servers []serverTools) error {
	var missing []string
	for _, st := range servers {
		if !st.srv.TaskEnabled() {
			continue
		}
		have := map[string]bool{}
		for _, t := range st.tools {
			have[t.Name] = true
		}
		for _, ts := range st.srv.TaskToolsets {
			for _, role := range []struct{ role, tool string }{
				{"submit_tool", ts.SubmitTool}, {"status_tool", ts.StatusTool}, {"cancel_tool", ts.CancelTool},
			} {
				if !have[role.tool] {
					missing = append(missing, fmt.Sprintf("server '%s' does not list '%s' (task_toolsets '%s' %s)", st.srv.Name, role.tool, ts.Name, role.role))
				}
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return bus.Errorf(bus.CodeConfigError, "MCP task toolsets name tools their servers do not have: %s; no MCP tools load until the names match",
		strings.Join(missing, "; "))
}

func nonNilFailed(f []bus.FailedServer) []bus.FailedServer {
	if f == nil {
		return []bus.FailedServer{}
	}
	return f
}
