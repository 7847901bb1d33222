package bus

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// Progress and cancellation of a tool call across the bus (DESIGN §5.1).
//
// A caller that wants the upstream's progress sets
// Call.ProgressInbox to a subject of its own under
// Names.ProgressInboxPrefix (Names.NewProgressInbox) and subscribes to it
// before
// sending the request. The toolcall replica that makes the upstream call
// asks the upstream for progress (its own progressToken) and publishes the
// params of every notifications/progress the upstream sends for that call
// to the inbox, unchanged but for progressToken, which it removes (the
// caller puts back its client's token). One replica publishes all of a
// call's progress, from one goroutine, so they arrive in order, and all of
// them before the call's reply. An inbox outside the prefix is
// refused (invalid_request, CheckInbox): toolcall publishes nowhere else.
//
// A call on a per-user subject (mcpbus.u.<user>.tools.call,
// nats.bind_identity; identity.go) comes from an agent worker that may
// subscribe to its own NATS inbox prefix only. Its progress inbox is
// UserInboxPrefix of the subject's user ("_INBOX_" + UserToken(user) +
// ".", not namespaced: the prefix the worker connects with) and one token: a
// subject of the worker's own inboxes (nats.go's nc.NewInbox() is one).
// Nothing else is accepted there, neither another user's inbox prefix nor
// ProgressInboxPrefix (the api service's relays): invalid_request naming
// progress_inbox. A call on the plain subject keeps the rule above.
//
// A caller that may cancel the call sets Call.CallID, unique
// among the calls in flight (CallID builds one from the caller's session
// and JSON-RPC id, so whichever api replica receives the client's
// notifications/cancelled derives the same id). Publishing
// ToolsCancelRequest to Names.ToolsCancel reaches every toolcall replica
// (a plain subscription, not a queue group); the replica running the call
// (and the stdio session's owner, when the call was handed over) cancels
// it, sends the upstream notifications/cancelled, keeps the session, and
// replies to the call with CodeCancelled. A cancel for another user's call
// does nothing; one for a call id not (yet) running is remembered for a
// minute (at most 64 per user), so a call registering just after its cancel (a hand-over on its
// way to the stdio owner) starts cancelled.
//
// With per-user subjects on, every toolcall replica also subscribes to
// Names.AnyUser(VerbToolsCancel) (mcpbus.u.*.tools.cancel, plain, no queue
// group), which an agent worker bound to a user may publish
// (Names.User(user, VerbToolsCancel)). There the user is the subject's: a
// body user_id naming another user makes the cancel do nothing.

// Log messages travel the same way: a call with Call.LogLevel
// and a progress inbox gets the params of each notifications/message the
// upstream sent for that call at or above that level on the inbox, with
// the header HeaderNotification: NotificationMessage (progress carries no
// such header), in order with its progress and before the reply.

// HeaderNotification names what a progress-inbox message is: absent for
// progress, NotificationMessage for a log message.
const (
	HeaderNotification  = "Mcpbus-Notification"
	NotificationMessage = "message"
)

// VerbToolsCancel cancels a tool call in flight on whichever toolcall
// replica runs it: Names.ToolsCancel, a plain subject (not a queue group),
// published, no reply. Body: ToolsCancelRequest.
const VerbToolsCancel Verb = "tools.cancel"

// ToolsCancel is the subject of VerbToolsCancel.
func (n Names) ToolsCancel() string { return n.Plain(VerbToolsCancel) }

// ProgressInboxPrefix starts every progress inbox of the deployment
// ("mcpbus.progress.", namespaced), followed by a random token.
func (n Names) ProgressInboxPrefix() string { return n.subject("mcpbus.progress.") }

// ToolsCancelRequest is the body of mcpbus.tools.cancel.
type ToolsCancelRequest struct {
	CallID string `json:"call_id"`
	// UserID must be the call's user_id: nobody cancels another user's
	// call.
	UserID string `json:"user_id,omitempty"`
	// Reason is the client's reason, passed to the upstream.
	Reason string `json:"reason,omitempty"`
}

// NewProgressInbox returns a fresh progress inbox subject.
func (n Names) NewProgressInbox() string { return newInbox(n.ProgressInboxPrefix()) }

// newInbox is prefix and a random token of 128 bits in hex (what
// validInbox accepts).
func newInbox(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// UserInboxPrefix is the NATS inbox prefix of userID's agent worker,
// "_INBOX_" + UserToken(userID) + "." (the worker connects with
// nats.CustomInboxPrefix("_INBOX_<token>"); deploy/nats/accounts.conf lets
// it subscribe there only). Not namespaced.
func UserInboxPrefix(userID string) string { return "_INBOX_" + UserToken(userID) + "." }

// validInbox reports whether s is prefix and one token of at most 64
// letters, digits, '-' and '_'.
func validInbox(prefix, s string) bool {
	tok, ok := strings.CutPrefix(s, prefix)
	if !ok || tok == "" || len(tok) > 64 {
		return false
	}
	for _, r := range tok {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// CallID derives a call id from the caller's user, MCP session and the
// request's JSON-RPC id (its JSON bytes): the same for the request and for
// the notifications/cancelled naming it, whichever replica sees them, and
// revealing neither the session id nor the request id.
func CallID(userID, sessionID string, requestID json.RawMessage) string {
	h := sha256.New()
	for _, part := range []string{userID, sessionID, string(normalizeID(requestID))} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// canonicalID reports an id that encoding/json writes back unchanged (so
// normalizeID need not decode it): a string of printable ASCII that needs
// no escape, or an integer of at most 15 digits without a leading zero.
func canonicalID(id json.RawMessage) bool {
	if len(id) >= 2 && id[0] == '"' && id[len(id)-1] == '"' {
		for _, c := range id[1 : len(id)-1] {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
		}
		return true
	}
	digits := id
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && (len(digits) > 1 || len(id) > 1)) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// normalizeID is a JSON-RPC id's canonical bytes: a string id and a number
// id with the same digits stay different.
func normalizeID(id json.RawMessage) json.RawMessage {
	if canonicalID(id) {
		return id
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return id
	}
	b, _ := json.Marshal(v)
	return b
}
