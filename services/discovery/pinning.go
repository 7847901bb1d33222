package discovery

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/pinning"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// pinFunc applies tool pinning to one server's successful discovery in
// generation gen: what it returns is what the cache keeps and serves.
type pinFunc func(ctx context.Context, srv *config.Server, owner string, gen int64, d discovered) (discovered, error)

// pinner applies each server's pinning policy (config.PinningSettings.Policy)
// through the pinning engine.
type pinner struct {
	settings config.PinningSettings
	engine   *pinning.Engine
	metrics  *metrics.Discovery
}

// definitionOf is the part of a listed tool a digest covers.
func definitionOf(t mcpclient.Tool) pinning.Definition {
	return pinning.Definition{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
		OutputSchema: t.OutputSchema, Annotations: t.Annotations}
}

// apply keeps the tools the policy serves: as listed, at their last
// approved definition, or not at all (withheld). A policy that needs the
// pin state and cannot read it fails the server's discovery (unavailable):
// nothing of it is served unverified.
func (p *pinner) apply(ctx context.Context, srv *config.Server, owner string, gen int64, d discovered) (discovered, error) {
	policy := p.settings.Policy(srv, owner != "")
	if policy == pinning.Off {
		return d, nil
	}
	defs := make([]pinning.Definition, len(d.tools))
	for i, t := range d.tools {
		defs[i] = definitionOf(t)
	}
	decisions, err := p.engine.Apply(ctx, pinning.Server{ID: srv.Name, Owner: owner, Policy: policy, Generation: gen}, defs)
	if err != nil {
		return discovered{}, bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf(
			"MCP server '%s': its tool pins cannot be read (pinning: %s); none of its tools is served until they can", srv.Name, policy))
	}
	counts := map[string]int{store.PinApproved: 0, store.PinPending: 0, store.PinBlocked: 0, store.PinRejected: 0}
	out := d
	out.tools = make([]mcpclient.Tool, 0, len(d.tools))
	out.digests = make([]string, 0, len(d.tools))
	for i, dec := range decisions {
		counts[dec.State]++
		switch {
		case dec.Serve == nil:
		case dec.Served():
			out.tools = append(out.tools, d.tools[i])
			out.digests = append(out.digests, dec.Digest)
		default:
			t := d.tools[i]
			t.Description, t.InputSchema, t.OutputSchema, t.Annotations = dec.Serve.Description, dec.Serve.InputSchema, dec.Serve.OutputSchema, dec.Serve.Annotations
			t.Raw = nil // the listed definition is not the one served
			out.tools = append(out.tools, t)
			out.digests = append(out.digests, dec.Digest)
		}
	}
	server := metrics.Server(srv.Name, owner != "")
	for state, n := range counts {
		p.metrics.Pins.WithLabelValues(server, state).Set(float64(n))
	}
	return out, nil
}

// digestsOf is each tool's definition digest, in order.
func digestsOf(tools []mcpclient.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = definitionOf(t).Digest()
	}
	return out
}

// onPinEvent drops the entry of the server whose pin an admin decided and
// warms the cache, so the server is discovered again under the decision.
func (s *Service) onPinEvent(m *nats.Msg) {
	var ev bus.PinEvent
	if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Server == "" {
		s.log.Warn("pin event ignored: no server", observability.Err(err))
		return
	}
	s.cache.forget(ev.Server, ev.Owner)
	s.log.Info("tool pin decided; discovering the server again", observability.Server(ev.Server))
	s.warm()
}

// forget drops server's entry (and, for a personal connection, its
// owner's personal catalog), so the next lookup discovers it again.
func (c *cache) forget(server, owner string) {
	c.mu.Lock()
	e := c.entries[server]
	if e == nil || e.owner != owner {
		c.mu.Unlock()
		return
	}
	delete(c.entries, server)
	if owner == "" {
		c.current = nil
	}
	c.mu.Unlock()
	if owner != "" {
		c.invalidatePersonal(owner)
	}
}
