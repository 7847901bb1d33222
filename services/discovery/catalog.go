package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"regexp"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// visibleName is the rule every tool name an agent sees must satisfy.
var visibleName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// clash records two servers producing the same visible name.
type clash struct {
	Name   string `json:"name"`
	Winner string `json:"winner"`
	Loser  string `json:"loser"`
}

// catalog is one published catalog: the flattened tools in config order.
type catalog struct {
	ext     *config.Extensions
	gen     int64
	tools   []bus.Tool
	failed  []bus.FailedServer
	clashes []clash
	hash    string
}

func buildCatalog(ext *config.Extensions, gen int64, entries map[string]*entry, failed map[string]string, log *slog.Logger) *catalog {
	cat := &catalog{ext: ext, gen: gen, tools: []bus.Tool{}, failed: []bus.FailedServer{}}
	owner := map[string]string{}
	for _, srv := range ext.Enabled() {
		if msg, bad := failed[srv.Name]; bad {
			cat.failed = append(cat.failed, bus.FailedServer{Server: srv.Name, Error: msg})
			continue
		}
		e, ok := entries[srv.Name]
		if !ok {
			continue
		}
		for _, t := range e.tools {
			name := t.Name
			if srv.ToolNamePrefix {
				name = srv.Name + "_" + t.Name
			}
			if !visibleName.MatchString(name) {
				log.Warn("tool dropped: its visible name is not allowed", observability.Server(srv.Name), observability.Tool(t.Name), "visible_name", name)
				continue
			}
			if first, taken := owner[name]; taken {
				cat.clashes = append(cat.clashes, clash{Name: name, Winner: first, Loser: srv.Name})
				log.Warn("tool name clash: the first server in config order wins", observability.Tool(name), "winner", first, "loser", srv.Name)
				continue
			}
			owner[name] = srv.Name
			cat.tools = append(cat.tools, toBusTool(srv, name, t))
		}
	}
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(cat.tools)
	cat.hash = hex.EncodeToString(h.Sum(nil))
	return cat
}

func toBusTool(srv *config.Server, name string, t mcpclient.Tool) bus.Tool {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	out := bus.Tool{
		Name: name, Server: srv.Name, OriginalName: t.Name,
		Description: t.Description, InputSchema: schema,
		OutputSchema: t.OutputSchema, Annotations: t.Annotations,
	}
	r := srv.Routing
	if ov, ok := srv.Tools[t.Name]; ok && ov.Routing != nil {
		if ov.Routing.Mode != nil {
			r.Mode = *ov.Routing.Mode
		}
		if ov.Routing.Priority != nil {
			r.Priority = *ov.Routing.Priority
		}
		if ov.Routing.Keywords != nil {
			r.Keywords = *ov.Routing.Keywords
		}
	}
	if r.Mode != "" && r.Mode != "off" {
		out.Routing = &bus.Routing{Mode: r.Mode, Priority: r.Priority, Keywords: r.Keywords}
	}
	for _, ts := range srv.TaskToolsets {
		if ts.SubmitTool == t.Name {
			out.TaskToolset = ts.Name
		}
	}
	return out
}

// visible reports whether a tool is offered to agents: task status and
// cancel tools are runtime-internal.
func (c *catalog) visible(t bus.Tool) bool {
	srv := c.ext.Server(t.Server)
	if srv == nil {
		return false
	}
	for _, ts := range srv.TaskToolsets {
		if t.OriginalName == ts.StatusTool || t.OriginalName == ts.CancelTool {
			return false
		}
	}
	return true
}

// reply is the agent-facing catalog.
func (c *catalog) reply(req bus.ToolsListRequest, _ config.ToolSearch) bus.ToolsListReply {
	out := bus.ToolsListReply{Generation: c.gen, CatalogHash: c.hash, Tools: []bus.Tool{}, Bind: []string{},
		Promoted: req.Promoted, FailedServers: c.failed}
	if out.Promoted == nil {
		out.Promoted = []string{}
	}
	for _, t := range c.tools {
		if !c.visible(t) {
			continue
		}
		out.Tools = append(out.Tools, t)
		out.Bind = append(out.Bind, t.Name)
	}
	return out
}

// full is the whole catalog, internal tools included, for toolcall.
func (c *catalog) full() bus.ToolsListReply {
	return bus.ToolsListReply{Generation: c.gen, CatalogHash: c.hash, Tools: c.tools, Bind: []string{}, Promoted: []string{}, FailedServers: c.failed}
}
