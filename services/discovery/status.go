package discovery

import (
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// status reports every configured server of ext as this replica sees it:
// ok (a cache entry for its current configuration), failed (its last
// discovery for this configuration failed), disabled, or pending (not
// discovered in this generation yet); a server held back by the drift
// guard is failed with restart_required; a server skipped for a bad field
// is invalid, with the reason. A failed server says how often in a
// row it failed and when a lookup retries it.
func (c *cache) status(ext *config.Extensions) bus.ServersReply {
	c.mu.Lock()
	defer c.mu.Unlock()
	chain := ext.InterceptorsFingerprint()
	out := bus.ServersReply{Generation: c.gen, Servers: []bus.ServerStatus{}, Clashes: []bus.NameClash{}, Error: c.lastErr}
	var counts map[string]int
	if c.current != nil && c.current.ext == ext {
		counts = c.current.counts
		out.Clashes = append(out.Clashes, c.current.clashes...)
		if c.current.fed != nil {
			out.Clashes = append(out.Clashes, c.current.fed.clashes...)
		}
	}
	for _, srv := range ext.Servers {
		st := bus.ServerStatus{Name: srv.Name, Enabled: srv.Enabled, Transport: srv.Type, Generation: c.gen, State: bus.ServerStatePending}
		e, f := c.entries[srv.Name], c.failures[srv.Name]
		switch {
		case !srv.Enabled:
			st.State = bus.ServerStateDisabled
		case c.held[srv.Name] != "":
			st.State = bus.ServerStateFailed
			st.LastError = c.held[srv.Name]
			st.RestartRequired = true
		case e.matches(srv, chain):
			st.State = bus.ServerStateOK
			at := e.discoveredAt
			st.DiscoveredAt = &at
			st.ToolCount = len(e.tools)
			st.PromptCount, st.ResourceCount, st.ResourceTemplateCount = len(e.fed.prompts), len(e.fed.resources), len(e.fed.templates)
			if msgs := e.fed.errs; len(msgs) > 0 {
				st.LastError = fedErrors(msgs)
			}
			st.Era, st.ProtocolVersion = string(e.era), e.protocolVersion
			if counts != nil {
				st.ToolCount = counts[srv.Name]
			}
		case f.owner == "" && f.matches(srv, chain):
			st.State = bus.ServerStateFailed
			if f.code == bus.CodeAuthRequired {
				st.State = bus.ServerStateNeedsAuth
			}
			st.LastError, st.Stderr = f.message, f.stderr
			st.ConsecutiveFailures = f.count
			next := f.nextRetry
			st.NextRetryAt = &next
		}
		out.Servers = append(out.Servers, st)
	}
	for _, p := range ext.Problems {
		if p.Severity == config.SeverityError && p.Server != "" && ext.Server(p.Server) == nil && !listed(out.Servers, p.Server) {
			out.Servers = append(out.Servers, bus.ServerStatus{Name: p.Server, Generation: c.gen, State: bus.ServerStateInvalid,
				LastError: problemReason(ext, p.Server)})
		}
	}
	return out
}

// listed reports whether servers has an entry named name.
func listed(servers []bus.ServerStatus, name string) bool {
	for _, s := range servers {
		if s.Name == name {
			return true
		}
	}
	return false
}

// problemReason joins the errors that made the server named name invalid,
// each "field: message", in file order.
func problemReason(ext *config.Extensions, name string) string {
	var out []string
	for _, p := range ext.Problems {
		if p.Severity != config.SeverityError || p.Server != name {
			continue
		}
		if p.Field != "" {
			out = append(out, p.Field+": "+p.Message)
		} else {
			out = append(out, p.Message)
		}
	}
	return strings.Join(out, "; ")
}
