package mcpserver

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Asking a legacy client for input. A 2026-07-28 upstream asks for input
// with an input_required result; a legacy client only understands the
// server-to-client requests of its era (elicitation/create,
// sampling/createMessage, roots/list). When the session declared the
// capabilities the input requests need and the request has a stream back
// to the client (Exchange.Notify: the POST's SSE response, the /sse
// stream, stdout), mcpbus sends each input request there as a request of
// its own, with an id it issues (askIDPrefix and 128 random bits). The
// client's answer is a response message in the same session, which any
// api replica may receive: Legacy.Dispatch publishes it on the bus
// subject of the session and id (bus.Names.MCPClientAnswer), where the
// waiting call receives it. The answers go upstream as the retry's
// inputResponses with the requestState, for at most maxAskRounds rounds.

// askIDPrefix starts the id of every request mcpbus sends a client.
const askIDPrefix = "mcpbus-ask-"

// maxAskRounds bounds the rounds of input one legacy call asks for.
const maxAskRounds = 4

// answerSubject is the bus subject of the answer to request id (as the
// client echoes it) in sess; "" for an id mcpbus did not issue.
func (s *Server) answerSubject(sess *Session, id json.RawMessage) string {
	var sid string
	if json.Unmarshal(id, &sid) != nil {
		return ""
	}
	tok, ok := strings.CutPrefix(sid, askIDPrefix)
	if _, err := hex.DecodeString(tok); !ok || err != nil || len(tok) != 32 {
		return ""
	}
	return s.deps.Names.MCPClientAnswer(bus.Digest(sess.ID)[:32], tok)
}

// clientAnswered publishes a legacy client's response to a request mcpbus
// sent it, for the call waiting on it (on whichever replica).
func (s *Server) clientAnswered(x *Exchange, m *Message) {
	if x.Session == nil {
		return
	}
	subj := s.answerSubject(x.Session, m.ID)
	if subj == "" {
		return
	}
	if err := s.deps.NC.Publish(subj, m.Encode()); err != nil {
		s.log.Warn("mcp client answer not published", "error", err)
	}
}

// canAsk reports whether mcpbus can put ir's input requests to the
// legacy client of x: it has a stream back, and its session declared
// every capability they need.
func canAsk(x *Exchange, ir *bus.InputRequired) bool {
	if x.Session == nil || x.Notify == nil || len(ir.InputRequests) == 0 {
		return false
	}
	var reqs map[string]struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(ir.InputRequests, &reqs) != nil || len(reqs) == 0 {
		return false
	}
	for _, r := range reqs {
		if !x.Session.ClientCapabilities.Has(bus.CapabilityOf(r.Method)) {
			return false
		}
	}
	return true
}

// askClient sends each of the input requests (a JSON object of
// {method, params} keyed by the server's ids) to the legacy client of x
// and returns its answers keyed alike (MCP inputResponses); who names
// the asker in errors ("MCP server 'x'", "tool 'y'").
func (s *Server) askClient(ctx context.Context, x *Exchange, who string, requests json.RawMessage) (json.RawMessage, *Error) {
	var reqs map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(requests, &reqs); err != nil {
		return nil, Errorf(CodeInternalError, "tools/call: %s sent unreadable input requests", who)
	}
	answers := map[string]json.RawMessage{}
	size := 0
	for key, r := range reqs {
		id := askIDPrefix + NewSessionID()
		idJSON := mustJSON(id)
		sub, err := s.deps.NC.SubscribeSync(s.answerSubject(x.Session, idJSON))
		if err == nil {
			// The subscription is on the server before the client can
			// answer (another replica may publish the answer).
			if err = s.deps.NC.FlushWithContext(ctx); err != nil {
				_ = sub.Unsubscribe()
			}
		}
		if err != nil {
			return nil, Errorf(CodeInternalError, "tools/call: cannot wait for the client's answer")
		}
		x.Notify(&Message{JSONRPC: "2.0", ID: idJSON, Method: r.Method, Params: r.Params})
		msg, err := sub.NextMsgWithContext(ctx)
		_ = sub.Unsubscribe()
		if err != nil {
			return nil, Errorf(CodeInternalError, "tools/call: the client did not answer %s for %s in time", r.Method, who)
		}
		answer, perr := Parse(msg.Data)
		if perr != nil {
			return nil, perr
		}
		if answer.Error != nil {
			return nil, Errorf(CodeInternalError, "tools/call: the client refused %s for %s: %s", r.Method, who, answer.Error.Message)
		}
		if size += len(answer.Result); size > bus.MaxInputResponsesBytes {
			return nil, Errorf(CodeInternalError, "tools/call: the client's answers for %s are larger than %d bytes", who, bus.MaxInputResponsesBytes)
		}
		answers[key] = answer.Result
	}
	return mustJSON(answers), nil
}

// asker answers, for one call of a legacy client that can be asked, the
// server-to-client requests a legacy upstream makes during it (toolcall
// sends them to its ask inbox, bus.AskRequest).
type asker struct {
	s     *Server
	x     *Exchange
	tool  string
	inbox string
	sub   *nats.Subscription
	msgs  chan *nats.Msg
}

// newAsker subscribes an ask inbox for a call of tool when x's client can
// be asked (a legacy session with a stream back that declared elicitation,
// sampling or roots); nil otherwise, or when the subscription fails (the
// requests are then refused upstream, as without it).
func (s *Server) newAsker(x *Exchange, tool string) *asker {
	c := func() *bus.ClientCapabilities {
		if x.Session == nil {
			return nil
		}
		return x.Session.ClientCapabilities
	}()
	if x.Notify == nil || !(c.Has("elicitation") || c.Has("sampling") || c.Has("roots")) {
		return nil
	}
	a := &asker{s: s, x: x, tool: tool, inbox: s.deps.Names.NewAskInbox(), msgs: make(chan *nats.Msg, 4)}
	var err error
	if a.sub, err = s.deps.NC.ChanSubscribe(a.inbox, a.msgs); err != nil {
		s.log.Warn("ask inbox not subscribed; the upstream's requests to the client are refused", "error", err)
		return nil
	}
	return a
}

func (a *asker) close() { _ = a.sub.Unsubscribe() }

// answer asks the client the upstream's request m and replies with its
// answer (a capability the session did not declare is refused).
func (a *asker) answer(ctx context.Context, m *nats.Msg) {
	var req bus.AskRequest
	reply := bus.AskReply{}
	switch {
	case json.Unmarshal(m.Data, &req) != nil || req.Method == "":
		reply.Error = &bus.RPCError{Code: CodeInvalidRequest, Message: "not a request"}
	case !a.x.Session.ClientCapabilities.Has(bus.CapabilityOf(req.Method)):
		reply.Error = &bus.RPCError{Code: CodeMethodNotFound, Message: "the client did not declare a capability for " + req.Method}
	default:
		requests := mustJSON(map[string]bus.AskRequest{"r": req})
		answers, rerr := a.s.askClient(ctx, a.x, "tool '"+a.tool+"'", requests)
		if rerr != nil {
			reply.Error = &bus.RPCError{Code: rerr.Code, Message: rerr.Message}
			break
		}
		var byKey map[string]json.RawMessage
		_ = json.Unmarshal(answers, &byKey)
		reply.Result = byKey["r"]
	}
	body, _ := json.Marshal(reply)
	if err := m.Respond(body); err != nil {
		a.s.log.Warn("answer to the upstream's request not sent", "error", err)
	}
}
