package discovery

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/virtual"
)

// Federation: the resources, resource templates and prompts of each
// server, discovered in the same session as its tools, cached in the same
// entry and published in the same catalog (docs/federation.md §2).

// fedLists is what one discovery learnt besides the tools: the server's
// features and its raw list items. errs names the lists that failed (by
// method) with their redacted message: the server keeps its tools.
type fedLists struct {
	features  mcpclient.Features
	prompts   []json.RawMessage
	resources []json.RawMessage
	templates []json.RawMessage
	errs      map[string]string
}

// discoverFed reads the lists a server declares, each to its last page.
// A failed list is recorded in errs, never fails the server.
func discoverFed(ctx context.Context, c *mcpclient.Client, srv *config.Server) fedLists {
	out := fedLists{features: c.ServerInfo().Features}
	read := func(method string, dst *[]json.RawMessage) {
		items, err := c.ListAll(ctx, method)
		if err != nil {
			if out.errs == nil {
				out.errs = map[string]string{}
			}
			// err names the server and the method (mcpclient's wrap).
			out.errs[method] = bus.AsError(redacted(srv, bus.Wrap(bus.CodeUpstreamError, err, err.Error()))).Message
			return
		}
		*dst = items
	}
	if out.features.Prompts {
		read(mcpclient.MethodPromptsList, &out.prompts)
	}
	if out.features.Resources {
		read(mcpclient.MethodResourcesList, &out.resources)
		read(mcpclient.MethodResourceTemplatesList, &out.templates)
	}
	return out
}

// visiblePromptName is the rule of a visible prompt name: 1 to 128
// characters without control characters.
var visiblePromptName = regexp.MustCompile(`^[^\x00-\x1f\x7f]{1,128}$`)

// fedCatalog is a catalog's federated lists, built once with it.
type fedCatalog struct {
	prompts   []bus.Prompt
	resources []bus.Resource
	templates []bus.ResourceTemplate
	// failed are each list's failed servers.
	failed map[string][]bus.FailedServer
	// revisions are each list's hash.
	revisions map[string]string
	clashes   []bus.NameClash
	// features are each server's declared features, by name.
	features map[string]mcpclient.Features
}

// buildFed flattens the servers' lists in config order: prompt names
// prefixed like tools (the first server keeps a clashing name), URIs made
// visible (two servers' same raw URI both stay, reported as a clash). A
// deployment server with tool_name_prefix false keeps its raw URIs, as it
// keeps its raw names (docs/federation.md, "Servers without a prefix"); a
// personal connection's are always visible.
func buildFed(servers []serverTools, log *slog.Logger) *fedCatalog {
	f := &fedCatalog{prompts: []bus.Prompt{}, resources: []bus.Resource{}, templates: []bus.ResourceTemplate{},
		failed: map[string][]bus.FailedServer{}, revisions: map[string]string{}, clashes: []bus.NameClash{},
		features: map[string]mcpclient.Features{}}
	promptOwner, uriOwner, templateOwner := map[string]string{}, map[string]string{}, map[string]string{}
	clash := func(kind, name, winner, loser string) {
		f.clashes = append(f.clashes, bus.NameClash{Kind: kind, Name: name, Winner: winner, Loser: loser})
		log.Warn("federation name clash", "kind", kind, "winner", winner, "loser", loser)
	}
	for _, st := range servers {
		srv := st.srv
		f.features[srv.Name] = st.fed.features
		for method, msg := range st.fed.errs {
			f.failed[method] = append(f.failed[method], bus.FailedServer{Server: srv.Name, Error: msg})
		}
		for _, raw := range st.fed.prompts {
			var p bus.Prompt
			if json.Unmarshal(raw, &p) != nil || p.Name == "" {
				log.Warn("prompt dropped: invalid definition", observability.Server(srv.Name))
				continue
			}
			p.OriginalName, p.Server, p.Personal = p.Name, srv.Name, st.personal
			if srv.ToolNamePrefix {
				p.Name = srv.Name + "_" + p.Name
			}
			if !visiblePromptName.MatchString(p.Name) {
				log.Warn("prompt dropped: invalid name", observability.Server(srv.Name), "prompt", p.OriginalName)
				continue
			}
			if first, taken := promptOwner[p.Name]; taken {
				clash("prompt", p.Name, first, srv.Name)
				continue
			}
			promptOwner[p.Name] = srv.Name
			f.prompts = append(f.prompts, p)
		}
		for _, raw := range st.fed.resources {
			var r bus.Resource
			if json.Unmarshal(raw, &r) != nil || r.URI == "" {
				log.Warn("resource dropped: invalid definition", observability.Server(srv.Name))
				continue
			}
			if first, taken := uriOwner[r.URI]; taken && first != srv.Name {
				clash("resource", r.URI, first, srv.Name)
			} else if !taken {
				uriOwner[r.URI] = srv.Name
			}
			if srv.ToolNamePrefix || st.personal {
				r.URI = bus.VisibleURI(srv.Name, r.URI)
			}
			r.Server = srv.Name
			f.resources = append(f.resources, r)
		}
		for _, raw := range st.fed.templates {
			var t bus.ResourceTemplate
			if json.Unmarshal(raw, &t) != nil || t.URITemplate == "" {
				log.Warn("resource template dropped: invalid definition", observability.Server(srv.Name))
				continue
			}
			if first, taken := templateOwner[t.URITemplate]; taken && first != srv.Name {
				clash("resource_template", t.URITemplate, first, srv.Name)
			} else if !taken {
				templateOwner[t.URITemplate] = srv.Name
			}
			if srv.ToolNamePrefix || st.personal {
				t.URITemplate = bus.VisibleTemplate(srv.Name, t.URITemplate)
			}
			t.Server = srv.Name
			f.templates = append(f.templates, t)
		}
	}
	f.revisions[mcpclient.MethodPromptsList] = hashOf(f.prompts)
	f.revisions[mcpclient.MethodResourcesList] = hashOf(f.resources)
	f.revisions[mcpclient.MethodResourceTemplatesList] = hashOf(f.templates)
	return f
}

func hashOf(v any) string {
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(v)
	return hex.EncodeToString(h.Sum(nil))
}

// fedErrors is a server status's last_error for its failed lists, in a
// fixed order.
func fedErrors(errs map[string]string) string {
	var out []string
	for _, m := range []string{mcpclient.MethodPromptsList, mcpclient.MethodResourcesList, mcpclient.MethodResourceTemplatesList} {
		if msg, ok := errs[m]; ok {
			out = append(out, msg)
		}
	}
	return strings.Join(out, "; ")
}

// handleResourcesList answers mcpbus.resources.list from the caller's
// catalog, without a guardrail-denied server's resources.
func (s *Service) handleResourcesList(ctx context.Context, req bus.FedListRequest) (bus.ResourcesListReply, error) {
	set, err := s.setFor(ctx, req.VirtualServer)
	if err != nil {
		return bus.ResourcesListReply{}, err
	}
	cat, err := s.catalog(ctx, req.UserID)
	if err != nil {
		return bus.ResourcesListReply{}, err
	}
	items := inSet(set, cat.fed.resources, func(vs *virtual.Set, r bus.Resource) bool { return vs.AllowsServer(r.Server) })
	items = allowedByServer(s, ctx, req, items, func(r bus.Resource) string { return r.Server })
	rev := cat.fed.revisions[mcpclient.MethodResourcesList]
	page, next, err := fedPage(cat.gen, rev, items, req)
	if err != nil {
		return bus.ResourcesListReply{}, err
	}
	return bus.ResourcesListReply{Generation: cat.gen, Revision: rev, Resources: page, NextCursor: next,
		FailedServers: fedFailed(cat, mcpclient.MethodResourcesList)}, nil
}

// handleTemplatesList answers mcpbus.resources.templates.list.
func (s *Service) handleTemplatesList(ctx context.Context, req bus.FedListRequest) (bus.ResourceTemplatesListReply, error) {
	set, err := s.setFor(ctx, req.VirtualServer)
	if err != nil {
		return bus.ResourceTemplatesListReply{}, err
	}
	cat, err := s.catalog(ctx, req.UserID)
	if err != nil {
		return bus.ResourceTemplatesListReply{}, err
	}
	items := inSet(set, cat.fed.templates, func(vs *virtual.Set, t bus.ResourceTemplate) bool { return vs.AllowsServer(t.Server) })
	items = allowedByServer(s, ctx, req, items, func(t bus.ResourceTemplate) string { return t.Server })
	rev := cat.fed.revisions[mcpclient.MethodResourceTemplatesList]
	page, next, err := fedPage(cat.gen, rev, items, req)
	if err != nil {
		return bus.ResourceTemplatesListReply{}, err
	}
	return bus.ResourceTemplatesListReply{Generation: cat.gen, Revision: rev, ResourceTemplates: page, NextCursor: next,
		FailedServers: fedFailed(cat, mcpclient.MethodResourceTemplatesList)}, nil
}

// handlePromptsList answers mcpbus.prompts.list, without denied prompts.
func (s *Service) handlePromptsList(ctx context.Context, req bus.FedListRequest) (bus.PromptsListReply, error) {
	set, err := s.setFor(ctx, req.VirtualServer)
	if err != nil {
		return bus.PromptsListReply{}, err
	}
	cat, err := s.catalog(ctx, req.UserID)
	if err != nil {
		return bus.PromptsListReply{}, err
	}
	items := inSet(set, cat.fed.prompts, func(vs *virtual.Set, p bus.Prompt) bool { return vs.Allows(p.Server, p.Name) })
	if s.rails.Enabled() {
		all := items
		items = make([]bus.Prompt, 0, len(all))
		for _, p := range all {
			if s.rails.Check(ctx, bus.GuardrailRequest{Kind: bus.GuardrailKindPrompt, Tool: p.Name, Server: p.Server,
				UserID: bus.Scope{UserID: req.UserID}.User(), ThreadID: bus.Scope{ThreadID: req.ThreadID}.Thread()}) == nil {
				items = append(items, p)
			}
		}
	}
	rev := cat.fed.revisions[mcpclient.MethodPromptsList]
	page, next, err := fedPage(cat.gen, rev, items, req)
	if err != nil {
		return bus.PromptsListReply{}, err
	}
	return bus.PromptsListReply{Generation: cat.gen, Revision: rev, Prompts: page, NextCursor: next,
		FailedServers: fedFailed(cat, mcpclient.MethodPromptsList)}, nil
}

// allowedByServer is items without those of a server the guardrails deny
// the caller (asked once per server).
func allowedByServer[T any](s *Service, ctx context.Context, req bus.FedListRequest, items []T, server func(T) string) []T {
	if !s.rails.Enabled() {
		return items
	}
	sc := bus.Scope{UserID: req.UserID, ThreadID: req.ThreadID}
	verdict := map[string]bool{}
	out := make([]T, 0, len(items))
	for _, it := range items {
		name := server(it)
		ok, asked := verdict[name]
		if !asked {
			ok = s.rails.Check(ctx, bus.GuardrailRequest{Kind: bus.GuardrailKindResource, Server: name, UserID: sc.User(), ThreadID: sc.Thread()}) == nil
			verdict[name] = ok
		}
		if ok {
			out = append(out, it)
		}
	}
	return out
}

// fedFailed is list's failed servers: the servers whose whole discovery
// failed, then those whose list failed.
func fedFailed(cat *catalog, list string) []bus.FailedServer {
	return append(slices.Clone(cat.failed), cat.fed.failed[list]...)
}

// fedPage is one page of a federated list: the whole list when req asks
// for no page. A cursor names the generation, the list's revision prefix
// and an offset; one of another list is CatalogChanged.
func fedPage[T any](gen int64, rev string, items []T, req bus.FedListRequest) ([]T, string, error) {
	if req.PageSize <= 0 && req.Cursor == "" {
		return items, "", nil
	}
	size := req.PageSize
	if size <= 0 {
		size = bus.CatalogPageSize
	}
	off := 0
	if req.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(req.Cursor)
		parts := strings.Split(string(raw), ".")
		if err != nil || len(parts) != 3 {
			return nil, "", bus.Errorf(bus.CodeInvalidRequest, "cursor: not one this service issued; list again from the first page")
		}
		g, gerr := strconv.ParseInt(parts[0], 10, 64)
		o, oerr := strconv.Atoi(parts[2])
		if gerr != nil || oerr != nil || o < 0 {
			return nil, "", bus.Errorf(bus.CodeInvalidRequest, "cursor: not one this service issued; list again from the first page")
		}
		if g != gen || parts[1] != rev[:cursorRevision] || o > len(items) {
			return nil, "", bus.CatalogChanged(gen)
		}
		off = o
	}
	end := min(off+size, len(items))
	next := ""
	if end < len(items) {
		next = base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%s.%d", gen, rev[:cursorRevision], end))
	}
	return items[off:end], next, nil
}
