package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/mcpserver"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// ServeHTTP serves /mcp, the streamable HTTP transport.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.serve(w, r, "") }

// ServeVirtual serves /mcp/v/<name>: /mcp on the virtual server name's
// view (the name is passed here, never carried in r's context).
func (h *Handler) ServeVirtual(w http.ResponseWriter, r *http.Request, name string) {
	h.serve(w, r, name)
}

// serve is the streamable HTTP transport on the virtual server vs ("" for
// the whole catalog).
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, vs string) {
	user, ok := h.authenticate(w, r)
	if !ok || !h.authorize(w, r, vs) {
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, user, vs)
	case http.MethodGet:
		if !h.modernRefusesStream(w, r) {
			h.get(w, r, user, vs)
		}
	case http.MethodDelete:
		if !h.modernRefusesStream(w, r) {
			h.delete(w, r, user, vs)
		}
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeHTTPError(w, http.StatusMethodNotAllowed, "use POST for messages, GET for the server's stream, DELETE to end the session")
	}
}

// post answers one JSON-RPC message.
func (h *Handler) post(w http.ResponseWriter, r *http.Request, user, vs string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeHTTPError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the message is larger than %d bytes", tooLarge.Limit))
			return
		}
		writeHTTPError(w, http.StatusBadRequest, "cannot read the request body")
		return
	}
	m, perr := mcpserver.Parse(body)
	if perr != nil {
		var id json.RawMessage
		if m != nil {
			id = m.ID
		}
		writeJSON(w, http.StatusBadRequest, mcpserver.ErrorReply(id, perr))
		return
	}
	if mcpserver.IsModern(m, r.Header.Get(HeaderProtocolVersion)) {
		h.modernPost(w, r, user, vs, m)
		return
	}
	if v := r.Header.Get(HeaderProtocolVersion); v != "" && !mcpserver.Supported(v) {
		writeJSON(w, http.StatusBadRequest, mcpserver.ErrorReply(m.ID, mcpserver.UnsupportedVersion(v)))
		return
	}
	var sess *mcpserver.Session
	if m.Method != "initialize" {
		var ok bool
		if sess, ok = h.session(w, r, user, vs); !ok {
			return
		}
	}
	x := exchange(r, user, sess, vs)
	// A client that takes an SSE response can get the request's progress:
	// the response turns into a stream at the first notification, and the
	// result ends it.
	stream := &replyStream{w: w}
	acc := acceptOf(r.Header.Get("Accept"))
	x.Notify = stream.notifier(acc)
	resp := h.deps.Server.Legacy().Dispatch(r.Context(), x, m)
	if stream.streaming() {
		// Nothing but the response can follow on a stream already open
		// (tools/call changes no session; it is touched all the same).
		if x.Session != nil {
			if err := h.sessions.touch(r.Context(), x.Session, x.Changed); err != nil {
				h.log.Warn("mcp session not touched", observability.Err(err))
			}
		}
		stream.end(resp)
		return
	}
	if !h.keep(w, r, x) {
		return
	}
	if resp == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if acc.onlySSE() {
		writeSSEResponse(w, resp)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// session loads the session a request names: 400 without an id (the
// transport requires one after initialize), 404 for an unknown, ended,
// expired or other user's one, or one initialized on another endpoint than
// the virtual server vs (the client initializes again).
func (h *Handler) session(w http.ResponseWriter, r *http.Request, user, vs string) (*mcpserver.Session, bool) {
	id := r.Header.Get(HeaderSessionID)
	if id == "" {
		writeHTTPError(w, http.StatusBadRequest, "missing "+HeaderSessionID+": send initialize first and then the session id it returned")
		return nil, false
	}
	sess, err := h.sessions.load(r.Context(), id, user)
	if err == nil && sess.VirtualServer != vs {
		// A session serves the endpoint it was initialized on only.
		err = errNoSession
	}
	if errors.Is(err, errNoSession) {
		writeHTTPError(w, http.StatusNotFound, "session not found (ended, expired or never issued): initialize again")
		return nil, false
	}
	if err != nil {
		h.log.Error("mcp session not read", observability.Err(err))
		writeHTTPError(w, http.StatusServiceUnavailable, "sessions are unavailable right now")
		return nil, false
	}
	return sess, true
}

// keep stores a created or changed session (and touches a used one), and
// issues a new session's id.
func (h *Handler) keep(w http.ResponseWriter, r *http.Request, x *mcpserver.Exchange) bool {
	if x.Session == nil {
		return true
	}
	var err error
	if x.Created {
		err = h.sessions.create(r.Context(), x.Session)
	} else {
		err = h.sessions.touch(r.Context(), x.Session, x.Changed)
	}
	if err != nil {
		h.log.Error("mcp session not stored", observability.Err(err))
		writeHTTPError(w, http.StatusServiceUnavailable, "sessions are unavailable right now")
		return false
	}
	if x.Created {
		w.Header().Set(HeaderSessionID, x.Session.ID)
	}
	return true
}

// get is the server's stream for notifications (list_changed, notify.go)
// and keep-alives; it ends with a retry hint when the replica shuts down.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, user, vs string) {
	if !wantsSSE(r.Header.Get("Accept")) {
		w.Header().Set("Allow", "POST, DELETE")
		writeHTTPError(w, http.StatusMethodNotAllowed, "the GET stream is text/event-stream: send Accept: text/event-stream")
		return
	}
	sess, ok := h.session(w, r, user, vs)
	if !ok {
		return
	}
	release, ok := h.openStream(w, user)
	if !ok {
		return
	}
	defer release()
	l := newListener(user, 4)
	if mcpserver.TaskSession(sess) {
		l.taskThread = exchange(r, user, sess, vs).Thread()
	}
	l.subscriber = mcpserver.SessionSubscriber(sess.ID)
	defer h.listen(l)()
	sw, ok := startSSE(w)
	if !ok {
		return
	}
	refresh, stopRefresh := context.WithCancel(r.Context())
	defer stopRefresh()
	go h.refreshSession(refresh, sess)
	h.hold(r, sw, l, h.sessionStream(r, sess))
}

// sessionStream is how a legacy session's stream (GET /mcp, /sse) is
// held: list_changed of every list, a retry hint when the replica closes,
// and at each keep-alive a touch of the session, which ends the stream
// once the session is gone.
func (h *Handler) sessionStream(r *http.Request, sess *mcpserver.Session) streamHooks {
	return streamHooks{
		closing: func(sw *sseWriter) { sw.retry(h.cfg.RetryHint) },
		changed: mcpserver.ListChangedNotification,
		tick: func() bool {
			// An open stream keeps its session alive. It is read again, not
			// written from the copy held here: another replica may have
			// changed it (initialize over /messages, setLevel). A session
			// gone (DELETE, expiry) ends the stream.
			cur, err := h.sessions.load(r.Context(), sess.ID, sess.UserID)
			if errors.Is(err, errNoSession) {
				return false
			}
			if err == nil {
				err = h.sessions.touch(r.Context(), cur, false)
			}
			if err != nil {
				h.log.Warn("mcp session not touched", observability.Err(err))
			}
			return true
		},
	}
}

// delete ends the session for every replica.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request, user, vs string) {
	sess, ok := h.session(w, r, user, vs)
	if !ok {
		return
	}
	if err := h.sessions.remove(r.Context(), sess); err != nil {
		h.log.Error("mcp session not deleted", observability.Err(err))
		writeHTTPError(w, http.StatusServiceUnavailable, "sessions are unavailable right now")
		return
	}
	h.unsubscribeSession(r.Context(), sess)
	w.WriteHeader(http.StatusNoContent)
}

// wantsSSE reports an Accept that takes text/event-stream but not JSON.
func wantsSSE(accept string) bool { return acceptOf(accept).onlySSE() }

// accepted is what a request's Accept takes: text/event-stream, JSON.
type accepted struct{ sse, json bool }

// onlySSE reports an Accept that takes text/event-stream but not JSON: a
// client that takes both gets JSON (one write, no stream to hold) unless
// the request has progress to send first.
func (a accepted) onlySSE() bool { return a.sse && !a.json }

// acceptOf parses an Accept header once per request: each media range's
// type, parameters (q among them) ignored, compared case-insensitively.
// It allocates nothing (every request reads it).
func acceptOf(accept string) (a accepted) {
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		switch mt = strings.TrimSpace(mt); {
		case strings.EqualFold(mt, "text/event-stream"):
			a.sse = true
		case strings.EqualFold(mt, "application/json"), mt == "*/*", strings.EqualFold(mt, "application/*"):
			a.json = true
		}
	}
	return a
}

func writeJSON(w http.ResponseWriter, status int, m *mcpserver.Message) {
	b := m.Encode()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeHTTPError answers a transport-level failure with a JSON-RPC error
// body (null id) and status.
func writeHTTPError(w http.ResponseWriter, status int, msg string) {
	code := mcpserver.CodeInvalidRequest
	if status >= 500 {
		code = mcpserver.CodeInternalError
	}
	writeJSON(w, status, mcpserver.ErrorReply(nil, &mcpserver.Error{Code: code, Message: msg}))
}

func writeSSEResponse(w http.ResponseWriter, m *mcpserver.Message) {
	sw, ok := startSSE(w)
	if !ok {
		return
	}
	b := m.Encode()
	_ = sw.event("message", b)
}
