package mcphttp

import (
	"bytes"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpbus/mcpbus/pkg/mcpserver"
)

// The stream plumbing every transport of this package shares: the SSE
// writer; a POST's response that turns into a stream at its first
// notification (streamable HTTP in both eras); and the loop that holds a
// stream open (GET /mcp, /sse, a 2026-07-28 subscriptions/listen).

// sseWriter writes server-sent events and flushes each.
type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

// startSSE sends the stream's headers.
func startSSE(w http.ResponseWriter) (*sseWriter, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		writeHTTPError(w, http.StatusInternalServerError, "streaming is not supported here")
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sseWriter{w: w, f: f}, true
}

// event writes one event; data must not contain a newline (JSON does not).
func (s *sseWriter) event(name string, data []byte) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", name, data)
	return s.write(b.Bytes())
}

func (s *sseWriter) comment(text string) error { return s.write([]byte(": " + text + "\n\n")) }

// retry advertises how long a client should wait before reconnecting.
func (s *sseWriter) retry(d time.Duration) {
	_ = s.write(fmt.Appendf(nil, "retry: %d\n\n", d.Milliseconds()))
}

func (s *sseWriter) write(b []byte) error {
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// replyStream is the response to one POST: JSON, unless a notification
// about the request (progress, a request to the client) comes first and the
// client takes an event stream; then the response is a stream from that
// notification on, and the reply its last event.
type replyStream struct {
	w  http.ResponseWriter
	sw *sseWriter
}

// notifier is the Exchange.Notify of a request whose client takes an
// event stream (acc.sse), nil for one that does not.
func (s *replyStream) notifier(acc accepted) func(*mcpserver.Message) {
	if !acc.sse {
		return nil
	}
	return func(n *mcpserver.Message) {
		if s.sw == nil {
			var ok bool
			if s.sw, ok = startSSE(s.w); !ok {
				return
			}
		}
		_ = s.sw.event("message", n.Encode())
	}
}

// streaming reports that the response became a stream.
func (s *replyStream) streaming() bool { return s.sw != nil }

// end sends the reply as the stream's last event (nil: none).
func (s *replyStream) end(resp *mcpserver.Message) {
	if resp != nil {
		_ = s.sw.event("message", resp.Encode())
	}
}

// streamHooks are what differs between the streams held open.
type streamHooks struct {
	// closing sends the stream's last words when the replica shuts down.
	closing func(*sseWriter)
	// changed is list's list_changed as this stream sends it; nil: the
	// stream does not take it.
	changed func(list string) *mcpserver.Message
	// tick runs after each keep-alive; false ends the stream. Nil: none.
	tick func() bool
}

// hold keeps sw open for l until the client goes, the replica closes or a
// hook ends it: messages made for this stream (l.out), l's pending
// list_changed, and keep-alives.
func (h *Handler) hold(r *http.Request, sw *sseWriter, l *listener, hooks streamHooks) {
	tick := time.NewTicker(h.cfg.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.closing:
			hooks.closing(sw)
			return
		case b := <-l.out:
			if sw.event("message", b) != nil {
				return
			}
		case <-l.wake:
			for _, list := range l.takeChanged() {
				if n := hooks.changed(list); n != nil && sw.event("message", n.Encode()) != nil {
					return
				}
			}
		case <-tick.C:
			if sw.comment("keep-alive") != nil {
				return
			}
			if hooks.tick != nil && !hooks.tick() {
				return
			}
		}
	}
}
