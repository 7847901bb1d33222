package mcpserver

import (
	"encoding/json"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpauth"
)

// CodeURLElicitationRequired is the JSON-RPC error a server answers when
// the client must send the person to a URL before the request can
// succeed (URL-mode elicitation, MCP 2025-11-25 and 2026-07-28).
const CodeURLElicitationRequired = -32042

// authLink is the answer to a call refused with auth_required, for a
// client that declared URL-mode elicitation (elicitation.url in its
// capabilities: a legacy session's, or a 2026-07-28 request's _meta): a
// URLElicitationRequiredError naming the link. nil for other clients and
// errors: they get the isError result whose text carries the link
// (refusal).
func authLink(x *Exchange, p *callParams, err error) *Error {
	e := bus.AsError(err)
	link, _ := e.Details["authorize_url"].(string)
	if e.Code != bus.CodeAuthRequired || link == "" || !declaresURLElicitation(x, p) {
		return nil
	}
	return &Error{Code: CodeURLElicitationRequired, Message: e.Message, Data: mustJSON(map[string]any{
		"elicitations": []map[string]any{{
			"mode": "url", "elicitationId": mcpauth.RandomToken(), "url": link,
			"message": "Connect your account on MCP server '" + serverOf(e) + "' to use this tool.",
		}},
	})}
}

func serverOf(e *bus.Error) string {
	s, _ := e.Details["server"].(string)
	return s
}

// declaresURLElicitation reports whether the caller's client can open a URL
// for the person: elicitation with a url member.
func declaresURLElicitation(x *Exchange, p *callParams) bool {
	var caps *bus.ClientCapabilities
	if x.Session != nil {
		caps = x.Session.ClientCapabilities
	} else if p != nil {
		caps = bus.CapabilitiesOf(p.Meta.ClientCapabilities)
	}
	if caps == nil || len(caps.Elicitation) == 0 {
		return false
	}
	var el map[string]json.RawMessage
	if json.Unmarshal(caps.Elicitation, &el) != nil {
		return false
	}
	_, ok := el["url"]
	return ok
}
