package toolcall

import (
	"encoding/json"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// SubjectSessionsClose is the subject of the deployment names that closes
// pooled sessions on every toolcall replica (a plain subscription, not a
// queue group: publish it, or request it to get one replica's count). Body:
// SessionsCloseRequest.
func SubjectSessionsClose(names bus.Names) string { return names.Internal("toolcall.sessions.close") }

// SessionsCloseRequest selects the sessions to close. With Server empty,
// every server; with UserID or ThreadID set, only the stdio sessions of
// that scope ("default" for an empty part when the other is set). An empty
// request closes everything.
type SessionsCloseRequest struct {
	Server   string `json:"server,omitempty"`
	UserID   string `json:"user_id,omitempty"`
	ThreadID string `json:"thread_id,omitempty"`
}

// SessionsCloseReply says how many sessions the answering replica closed.
type SessionsCloseReply struct {
	Closed int `json:"closed"`
}

func (s *Service) handleSessionsClose(m *nats.Msg) {
	var req SessionsCloseRequest
	if len(m.Data) > 0 {
		if err := json.Unmarshal(m.Data, &req); err != nil {
			s.log.Warn("ignoring a malformed sessions close request", observability.Err(err))
			return
		}
	}
	n := s.CloseSessions(req)
	if m.Reply != "" {
		body, _ := json.Marshal(SessionsCloseReply{Closed: n})
		_ = m.Respond(body)
	}
}

// CloseSessions closes the pooled sessions req selects (per scope, per
// server, or all) and returns how many.
func (s *Service) CloseSessions(req SessionsCloseRequest) int {
	scope := ""
	if req.UserID != "" || req.ThreadID != "" {
		scope = bus.Scope{UserID: req.UserID, ThreadID: req.ThreadID}.Key()
	}
	match := func(k sessionKey) bool {
		return (req.Server == "" || k.server == req.Server) && (scope == "" || k.scope == scope)
	}
	n := s.stdio.closeWhere(match)
	if scope == "" {
		n += s.remote.closeWhere(match)
	}
	s.log.Info("mcp sessions closed", observability.Server(req.Server), "user_id", req.UserID, "thread_id", req.ThreadID, "closed", n)
	return n
}
