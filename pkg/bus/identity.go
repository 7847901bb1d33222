package bus

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go/micro"
)

// Identity on the bus.
//
// The plain end-user subjects (mcpbus.tools.list, .tools.search,
// .tools.call, .tasks.list, .tasks.get, .tasks.cancel) take the caller from
// the user_id in the body: whoever may publish them may act as any user.
// They are for trusted callers only: the api service (which authenticated
// the user with an API key) and an agent worker that serves many users.
//
// A deployment that binds the caller's identity to its NATS user sets
// nats.bind_identity: true. The services then also serve the per-user
// subjects
//
//	mcpbus.u.<user>.tools.list   mcpbus.u.<user>.tools.search   mcpbus.u.<user>.tools.call
//	mcpbus.u.<user>.tasks.list   mcpbus.u.<user>.tasks.get      mcpbus.u.<user>.tasks.cancel
//	mcpbus.u.<user>.tools.cancel (published, no reply: progress.go)
//
// (with the namespace prefix, if any), where <user> is UserToken(user id).
// On these the caller is the user of the subject: the services set the
// body's user_id to it, and a body whose user_id is another user is refused
// with forbidden (a tools.cancel naming another user does nothing). A
// handler learns that its request came in on a per-user subject, and for
// whom, from BoundUser; a tool call's progress inbox is then under the
// caller's own NATS inbox prefix (progress.go). NATS permissions enforce the rest: an agent worker's NATS
// user may publish mcpbus.u.<its user>.> only, subscribe to its own inbox
// prefix only (nats.CustomInboxPrefix("_INBOX_<user>")), and nothing under
// mcpbus.internal.>, the KV buckets or the events stream; the services'
// NATS users have allow_responses. deploy/nats/accounts.conf is that
// configuration. mcpbus.internal.> is never for anyone but the services:
// its requests and replies carry routing data and decrypted personal
// connection definitions.

// Verb is an end-user request of the NATS contract ("tools.call"): served
// on the plain subject (Names.Plain) and, with per-user subjects on, on
// every user's subject (Names.AnyUser).
type Verb string

// The end-user verbs.
const (
	VerbToolsList   Verb = "tools.list"
	VerbToolsSearch Verb = "tools.search"
	VerbToolsCall   Verb = "tools.call"
	VerbTasksList   Verb = "tasks.list"
	VerbTasksGet    Verb = "tasks.get"
	VerbTasksCancel Verb = "tasks.cancel"
)

// Plain is the unbound subject of v (mcpbus.<verb>).
func (n Names) Plain(v Verb) string { return n.subject("mcpbus." + string(v)) }

// WithUserSubjects returns n with per-user subjects served
// (nats.bind_identity).
func (n Names) WithUserSubjects(on bool) Names {
	n.userSubjects = on
	return n
}

// UserSubjects reports whether the services serve the per-user subjects.
func (n Names) UserSubjects() bool { return n.userSubjects }

// userRoot is "mcpbus.u." with the namespace prefix.
func (n Names) userRoot() string { return n.subject("mcpbus.u.") }

// UserPrefix is the subject prefix of one user's requests
// ("mcpbus.u.<token>."); UserPrefix(u)+">" is what that user's agent worker
// may publish.
func (n Names) UserPrefix(userID string) string { return n.userRoot() + UserToken(userID) + "." }

// User is the per-user subject of v for userID.
func (n Names) User(userID string, v Verb) string { return n.UserPrefix(userID) + string(v) }

// AnyUser matches v on every user's subject (what the services subscribe).
func (n Names) AnyUser(v Verb) string { return n.userRoot() + "*." + string(v) }

// isPlainToken reports a user id used as its own subject token: 1 to 64
// letters, digits, '_' or '-' (checked byte by byte, not by a regexp:
// UserToken runs for every call's audit subject).
func isPlainToken(s string) bool { return len(s) <= 64 && subjectToken(s) }

// UserToken is a user id as one subject token: the id itself when it is 1
// to 64 letters, digits, '-' or '_', else '~' followed by the unpadded
// base64url of the id (so "alice@example.com" is
// "~YWxpY2VAZXhhbXBsZS5jb20"). The mapping is one-to-one: a plain token
// never starts with '~'.
func UserToken(userID string) string {
	if isPlainToken(userID) {
		return userID
	}
	return "~" + base64.RawURLEncoding.EncodeToString([]byte(userID))
}

// ParseUserToken inverts UserToken.
func ParseUserToken(tok string) (string, bool) {
	if isPlainToken(tok) {
		return tok, true
	}
	enc, ok := strings.CutPrefix(tok, "~")
	if !ok {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(raw) == 0 || UserToken(string(raw)) != tok {
		return "", false
	}
	return string(raw), true
}

// UserOf returns the user a per-user subject of n binds, and false for any
// other subject.
func (n Names) UserOf(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, n.userRoot())
	if !ok {
		return "", false
	}
	tok, _, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	return ParseUserToken(tok)
}

// BindUser serves next on the per-user subjects of n: the body's user_id
// becomes the subject's user. A body naming another user_id is refused
// with forbidden, a subject without a valid user token or a body that is
// not a JSON object with invalid_request; next never sees either.
func BindUser(n Names, log *slog.Logger, next micro.Handler) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		user, ok := n.UserOf(r.Subject())
		if !ok {
			Respond[struct{}](r, log, struct{}{}, Errorf(CodeInvalidRequest, "the subject does not name a user"))
			return
		}
		body, err := bindUserID(r.Data(), user)
		if err != nil {
			Respond[struct{}](r, log, struct{}{}, err)
			return
		}
		next.Handle(boundRequest{Request: r, data: body, user: user})
	})
}

// boundRequest is a request whose body carries the bound user_id; user is
// the subject's user.
type boundRequest struct {
	micro.Request
	data []byte
	user string
}

type boundUserKey struct{}

// withBoundUser returns ctx of a request r: it carries the user r's
// per-user subject binds when BindUser served it.
func withBoundUser(ctx context.Context, r micro.Request) context.Context {
	if b, ok := r.(boundRequest); ok {
		return context.WithValue(ctx, boundUserKey{}, b.user)
	}
	return ctx
}

// BoundUser returns the user of the per-user subject the request being
// served came in on (BindUser bound it; Handler puts it in the handler's
// context), and false for a request on any other subject.
func BoundUser(ctx context.Context) (string, bool) {
	u, ok := ctx.Value(boundUserKey{}).(string)
	return u, ok
}

func (b boundRequest) Data() []byte { return b.data }

// bindUserID sets "user_id" in a JSON object body to user.
func bindUserID(data []byte, user string) ([]byte, error) {
	var fields map[string]json.RawMessage
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &fields); err != nil {
			return nil, Errorf(CodeInvalidRequest, "request body is not a JSON object")
		}
	}
	if fields == nil { // no body, or null
		fields = map[string]json.RawMessage{}
	}
	if raw, ok := fields["user_id"]; ok {
		var got string
		if err := json.Unmarshal(raw, &got); err != nil {
			return nil, Errorf(CodeInvalidRequest, "user_id must be a string")
		}
		if got != "" && got != user {
			return nil, Errorf(CodeForbidden, "user_id in the body is not the user of the subject: a caller bound to a user acts as that user only")
		}
	}
	id, _ := json.Marshal(user)
	fields["user_id"] = id
	return json.Marshal(fields)
}
