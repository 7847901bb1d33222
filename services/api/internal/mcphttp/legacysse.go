package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/mcpserver"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// deliverTimeout bounds handing a response to the replica holding the
// session's stream.
const deliverTimeout = 10 * time.Second

// SSE serves GET /sse, the 2024-11-05 transport's stream: its first event
// names the endpoint to POST messages to, and every response arrives on it.
// The session lives as long as the stream.
func (h *Handler) SSE(w http.ResponseWriter, r *http.Request) { h.sse(w, r, "") }

// SSEVirtual serves GET /sse/v/<name>: /sse on the virtual server name's
// view.
func (h *Handler) SSEVirtual(w http.ResponseWriter, r *http.Request, name string) { h.sse(w, r, name) }

// sse is the 2024-11-05 transport's stream on the virtual server vs ("" for
// the whole catalog).
func (h *Handler) sse(w http.ResponseWriter, r *http.Request, vs string) {
	user, ok := h.authenticate(w, r)
	if !ok || !h.authorize(w, r, vs) {
		return
	}
	release, ok := h.openStream(w, user)
	if !ok {
		return
	}
	defer release()
	now := h.deps.Now().UTC()
	sess := &mcpserver.Session{ID: mcpserver.NewSessionID(), UserID: user, VirtualServer: vs, CreatedAt: now}
	ctx := r.Context()
	// Responses share the stream's queue (they block for room); list_changed
	// is marked pending on the listener (never dropped, never doubled).
	l := newListener(user, 16)
	l.subscriber = mcpserver.SessionSubscriber(sess.ID)
	out := l.out
	defer h.listen(l)()
	sub, err := h.deps.NC.Subscribe(h.deps.Names.InternalMCPStream(sess.ID), func(m *nats.Msg) {
		select {
		case out <- m.Data:
			_ = m.Respond(nil)
		case <-ctx.Done():
		}
	})
	if err == nil {
		err = h.deps.NC.FlushTimeout(deliverTimeout)
	}
	if err == nil {
		err = h.sessions.create(ctx, sess)
	}
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		h.log.Error("mcp sse stream not opened", observability.Err(err))
		writeHTTPError(w, http.StatusServiceUnavailable, "sessions are unavailable right now")
		return
	}
	defer func() {
		_ = sub.Unsubscribe()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if cur, err := h.sessions.load(cctx, sess.ID, sess.UserID); err == nil {
			h.unsubscribeSession(cctx, cur)
		}
		if err := h.sessions.remove(cctx, sess); err != nil {
			h.log.Warn("mcp sse session not removed", observability.Err(err))
		}
	}()
	refresh, stopRefresh := context.WithCancel(ctx)
	defer stopRefresh()
	go h.refreshSession(refresh, sess)
	sw, ok := startSSE(w)
	if !ok {
		return
	}
	endpoint := "messages?session_id=" + url.QueryEscape(sess.ID)
	if sess.VirtualServer != "" {
		// Relative to /sse/v/<name>, as /sse's is to /sse: a path prefix
		// in front of the api keeps working.
		endpoint = "../../" + endpoint
	}
	if sw.event("endpoint", []byte(endpoint)) != nil {
		return
	}
	h.hold(r, sw, l, h.sessionStream(r, sess))
}

// Messages serves POST /messages?session_id=: it answers the message here
// and hands the response to the replica holding the session's stream.
func (h *Handler) Messages(w http.ResponseWriter, r *http.Request) {
	user, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeHTTPError(w, http.StatusMethodNotAllowed, "POST messages here")
		return
	}
	id := r.URL.Query().Get("session_id")
	sess, err := h.sessions.load(r.Context(), id, user)
	if errors.Is(err, errNoSession) {
		writeHTTPError(w, http.StatusNotFound, "session not found: open /sse again")
		return
	}
	if err != nil {
		h.log.Error("mcp session not read", observability.Err(err))
		writeHTTPError(w, http.StatusServiceUnavailable, "sessions are unavailable right now")
		return
	}
	// The session's virtual server, checked again: the key's policy may
	// have changed since the stream opened.
	if !h.authorize(w, r, sess.VirtualServer) {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeHTTPError(w, http.StatusRequestEntityTooLarge, "the message cannot be read (too large?)")
		return
	}
	m, perr := mcpserver.Parse(body)
	var resp *mcpserver.Message
	var x *mcpserver.Exchange
	if perr != nil {
		var mid json.RawMessage
		if m != nil {
			mid = m.ID
		}
		resp = mcpserver.ErrorReply(mid, perr)
	} else {
		initialized := sess
		if sess.ProtocolVersion == "" {
			initialized = nil // the stream is open, initialize has not come yet
		}
		x = exchange(r, user, initialized, sess.VirtualServer)
		x.Notify = func(n *mcpserver.Message) {
			b, _ := json.Marshal(n)
			if err := h.deliver(r.Context(), sess.ID, b); err != nil {
				h.log.Warn("mcp notification not delivered to its stream", observability.Err(err))
			}
		}
		// The 2024-11-05 transport is the legacy era's only.
		resp = h.deps.Server.Legacy().Dispatch(r.Context(), x, m)
		if x.Created {
			// The session is the stream's: keep its id and birth.
			x.Session.ID, x.Session.CreatedAt = sess.ID, sess.CreatedAt
		}
		if !h.keep(w, r, x) {
			return
		}
	}
	if resp != nil {
		b := resp.Encode()
		if err := h.deliver(r.Context(), sess.ID, b); err != nil {
			if errors.Is(err, nats.ErrNoResponders) {
				writeHTTPError(w, http.StatusNotFound, "the session's stream is closed: open /sse again")
				return
			}
			h.log.Error("mcp response not delivered to its stream", observability.Err(err))
			writeHTTPError(w, http.StatusServiceUnavailable, "the response could not be delivered to the session's stream")
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// deliver hands one message to the replica holding the session's /sse
// stream and waits until it is queued there.
func (h *Handler) deliver(ctx context.Context, sessionID string, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	defer cancel()
	_, err := h.deps.NC.RequestWithContext(ctx, h.deps.Names.InternalMCPStream(sessionID), msg)
	return err
}
