package mcphttp

import (
	"context"
	"net/http"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
)

// The modern era (2026-07-28) on /mcp: every POST stands alone. Identity
// is the Authorization header of each request, the thread the
// Mcpbus-Thread-Id header else "default"; no Mcp-Session-Id is read,
// minted or echoed. The mirrored headers (MCP-Protocol-Version,
// Mcp-Method, Mcp-Name) are checked against the body before anything
// runs; closing a request's response stream cancels it; GET and DELETE
// answer 405; subscriptions/listen holds the request's SSE response open
// for notifications/tools/list_changed, which the replica's catalog event
// subscriptions (notify.go) feed as they feed the legacy GET streams.

// HTTP headers of the modern era.
const (
	HeaderMethod = "Mcp-Method"
	HeaderName   = "Mcp-Name"
)

// modernPost serves a POST whose message is modern (mcpserver.IsModern) on
// the virtual server vs.
func (h *Handler) modernPost(w http.ResponseWriter, r *http.Request, user, vs string, m *mcpserver.Message) {
	if !m.IsRequest() {
		// This revision defines no client notifications over HTTP (a
		// closed stream is the cancellation): accepted and ignored.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	modern := h.deps.Server.Modern()
	x := exchange(r, user, nil, vs)
	hdr := mcpserver.Headers{Version: r.Header.Get(HeaderProtocolVersion), Method: r.Header.Get(HeaderMethod),
		Name: r.Header.Values(HeaderName), Params: paramHeaders(r.Header)}
	if rerr := modern.Admit(r.Context(), x, m, hdr); rerr != nil {
		reply := mcpserver.ErrorReply(m.ID, rerr)
		writeJSON(w, modernStatus(reply), reply)
		return
	}
	if m.Method == mcpserver.MethodListen {
		h.modernListen(w, r, x, m)
		return
	}
	stream := &replyStream{w: w}
	acc := acceptOf(r.Header.Get("Accept"))
	x.Notify = stream.notifier(acc)
	resp := modern.Dispatch(r.Context(), x, m)
	if r.Context().Err() != nil {
		// The client closed the stream: nothing more is sent for it.
		return
	}
	switch {
	case stream.streaming():
		stream.end(resp)
	case acc.onlySSE():
		writeSSEResponse(w, resp)
	default:
		writeJSON(w, modernStatus(resp), resp)
	}
}

// modernStatus is the HTTP status of a modern response: 400 for the
// errors the transport says are a Bad Request (malformed request, invalid
// params, the protocol's header, capability and version errors), 404 for
// an unknown method, 200 otherwise.
func modernStatus(resp *mcpserver.Message) int {
	if resp.Error == nil {
		return http.StatusOK
	}
	switch resp.Error.Code {
	case mcpserver.CodeParseError, mcpserver.CodeInvalidRequest, mcpserver.CodeInvalidParams,
		mcpserver.CodeHeaderMismatch, mcpserver.CodeMissingRequiredClientCapability, mcpserver.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	case mcpserver.CodeMethodNotFound:
		return http.StatusNotFound
	}
	return http.StatusOK
}

// modernRefusesStream answers 405 to a GET or DELETE from a modern client
// (a modern MCP-Protocol-Version, or no session id to name): the modern
// era has neither the standalone stream nor sessions. It reports whether
// it answered.
func (h *Handler) modernRefusesStream(w http.ResponseWriter, r *http.Request) bool {
	if !mcpserver.IsModernVersion(r.Header.Get(HeaderProtocolVersion)) && r.Header.Get(HeaderSessionID) != "" {
		return false
	}
	w.Header().Set("Allow", "POST")
	writeHTTPError(w, http.StatusMethodNotAllowed, "protocol "+mcpserver.Version20260728+" has no GET stream and no sessions: POST subscriptions/listen for notifications (legacy clients: initialize first and send the Mcp-Session-Id)")
	return true
}

// modernListen holds a subscriptions/listen response stream: the
// acknowledgement first, then list_changed (when asked for) whenever this
// user's catalog may have changed, keep-alives, and on shutdown the
// graceful-closure response before the stream ends.
func (h *Handler) modernListen(w http.ResponseWriter, r *http.Request, x *mcpserver.Exchange, m *mcpserver.Message) {
	user := x.UserID
	modern := h.deps.Server.Modern()
	ack, filter, refusal := modern.Listen(m)
	if refusal != nil {
		writeJSON(w, modernStatus(refusal), refusal)
		return
	}
	release, ok := h.openStream(w, user)
	if !ok {
		return
	}
	defer release()
	l := newListener(user, 4)
	if len(filter.TaskIDs) > 0 {
		// The tasks extension's notifications/tasks for the caller's own
		// tasks among them (taskEvent).
		l.taskThread, l.subscription, l.taskIDs = x.Thread(), m.ID, map[string]bool{}
		for _, id := range filter.TaskIDs {
			l.taskIDs[id] = true
		}
	}
	if len(filter.ResourceSubscriptions) > 0 {
		// Only the URIs subscribed are acknowledged; the others (unmapped,
		// denied, a server without subscriptions) are left out.
		thread := x.Thread()
		l.subscriber, l.listenID = bus.Digest(mcpserver.NewSessionID()), m.ID
		filter.ResourceSubscriptions = h.listenSubscriptions(r.Context(), user, thread, l.subscriber, filter.ResourceSubscriptions)
		ack = mcpserver.ListenAck(m.ID, filter)
		subs, stop := context.WithCancel(r.Context())
		defer stop()
		go h.holdListenSubscriptions(subs, user, thread, l.subscriber, filter.ResourceSubscriptions)
	}
	defer h.listen(l)()
	sw, ok := startSSE(w)
	if !ok {
		return
	}
	if sw.event("message", ack.Encode()) != nil {
		return
	}
	// l.out carries the notifications/tasks made for this stream; the
	// lists' list_changed go to the lists the listen asked for, tagged with
	// its subscription id; the replica closing ends the subscription with
	// its graceful-closure response.
	h.hold(r, sw, l, streamHooks{
		closing: func(sw *sseWriter) { _ = sw.event("message", modern.ListenClosed(m.ID).Encode()) },
		changed: func(list string) *mcpserver.Message {
			if !filter.Wants(list) {
				return nil
			}
			return mcpserver.ListChangedOn(list, m.ID)
		},
	})
}

// paramHeaders are r's Mcp-Param-* headers by lower-cased name after the
// prefix.
func paramHeaders(hdr http.Header) map[string][]string {
	var out map[string][]string
	for k, v := range hdr {
		if len(k) > len(paramPrefix) && strings.EqualFold(k[:len(paramPrefix)], paramPrefix) {
			if out == nil {
				out = map[string][]string{}
			}
			out[strings.ToLower(k[len(paramPrefix):])] = v
		}
	}
	return out
}

const paramPrefix = "Mcp-Param-"
