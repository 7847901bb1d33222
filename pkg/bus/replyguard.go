package bus

import (
	"strings"
	"time"
)

// Reply subjects.
//
// A request's reply subject is chosen by whoever publishes the request,
// and the services answer with their own NATS permissions, which reach
// every subject of the account: a reply subject of mcpbus.u.bob.tools.call,
// $KV.MCPBUS.config or mcpbus.events.catalog would make a service publish
// its answer there (a call run as bob, an overwritten KV key, a forged
// event). NATS permissions cannot tell a reply from any other publish of
// the services' user, so the services check the reply subject themselves
// before serving a request (ReplyAllowed; microsvc applies it to every
// endpoint): a request whose reply subject its caller could not receive on
// is dropped, never answered, counted and audited (DroppedReply).
//
// A caller may receive on:
//   - on a per-user subject (mcpbus.u.<user>.…): UserInboxPrefix(user)
//     and one or more tokens, the inboxes the user's agent worker
//     subscribes to (_INBOX_<user>.…), nothing else;
//   - on any other subject: a NATS inbox, "_INBOX." or "_INBOX_<token>."
//     followed by one or more tokens (nats.go's default inboxes and those
//     of a connection with a custom inbox prefix, such as a trusted agent
//     worker's).
//
// A request without a reply subject (a plain publish, such as
// tools.cancel) is served and answered nowhere. The progress and ask
// inboxes a tool call names in its body follow the same rule (CheckInbox).

// maxReplySubject bounds a reply subject's length.
const maxReplySubject = 256

// ReplyAllowed reports whether a request on subject may be answered on
// reply (see above).
func (n Names) ReplyAllowed(subject, reply string) bool {
	if reply == "" {
		return true
	}
	if user, ok := n.UserOf(subject); ok {
		return inboxUnder(UserInboxPrefix(user), reply)
	}
	if strings.HasPrefix(subject, n.userRoot()) {
		return false // a per-user subject without a valid user: nobody's inbox
	}
	if inboxUnder("_INBOX.", reply) {
		return true
	}
	custom, ok := strings.CutPrefix(reply, "_INBOX_")
	if !ok {
		return false
	}
	tok, rest, ok := strings.Cut(custom, ".")
	return ok && subjectToken(tok) && inboxUnder("", rest)
}

// inboxUnder reports whether s is prefix followed by one or more tokens of
// letters, digits, '-' and '_' separated by '.', at most maxReplySubject
// bytes in all.
func inboxUnder(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" || len(s) > maxReplySubject {
		return false
	}
	for tok := range strings.SplitSeq(rest, ".") {
		if !subjectToken(tok) {
			return false
		}
	}
	return true
}

// subjectToken reports whether tok is a non-empty run of letters, digits,
// '-' and '_' (no wildcard, no separator).
func subjectToken(tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// CheckInbox refuses an inbox a tool call names in its body (field is its
// JSON name: progress_inbox, ask_inbox) that its caller could not receive
// on: on a per-user subject (bound, for user) one under
// UserInboxPrefix(user); on any other, one under plainPrefix (the api
// service's relays: ProgressInboxPrefix, AskInboxPrefix). Each is the
// prefix and one token. An empty inbox is no inbox. The error is
// invalid_request naming field.
func CheckInbox(field, inbox, plainPrefix, user string, bound bool) error {
	switch {
	case inbox == "":
		return nil
	case bound && !validInbox(UserInboxPrefix(user), inbox):
		return Errorf(CodeInvalidRequest, "%s of a call on a per-user subject must be a subject %s<token> (the caller's own inbox prefix)", field, UserInboxPrefix(user))
	case !bound && !validInbox(plainPrefix, inbox):
		return Errorf(CodeInvalidRequest, "%s must be a subject %s<token>", field, plainPrefix)
	}
	return nil
}

// KindReplyDropped is the audit record kind of a dropped request
// (DroppedReply).
const KindReplyDropped = "reply_dropped"

// DroppedReply is the audit record of a request dropped for its reply
// subject, published on AuditReplyDropped of the subject's user (the
// fields are those of the audit package's Record).
type DroppedReply struct {
	Kind    string    `json:"kind"`
	Time    time.Time `json:"time"`
	User    string    `json:"user,omitempty"`
	Service string    `json:"service"`
	Subject string    `json:"subject"`
	Reply   string    `json:"reply"`
}

// AuditReplyDropped is the subject of the record of a request of userID
// ("" when the subject names nobody) dropped for its reply subject.
func (n Names) AuditReplyDropped(userID string) string {
	return n.subject("mcpbus.audit." + KindReplyDropped + "." + UserToken(userID))
}
