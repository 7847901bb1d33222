package bus

// DefaultScopeID is the user or thread id of a request that sends none.
const DefaultScopeID = "default"

// Scope is the (user, thread) a call, a stdio session or a workspace
// belongs to, with the ids as the caller sent them. The raw ids decide
// whose personal connections and calls are whose (no user: none); the
// defaulted ones (User, Thread) name sessions, workspaces and user_auth
// entries.
type Scope struct {
	UserID, ThreadID string
}

// User is the user id, DefaultScopeID when none was sent.
func (s Scope) User() string { return orDefault(s.UserID) }

// Thread is the thread id, DefaultScopeID when none was sent.
func (s Scope) Thread() string { return orDefault(s.ThreadID) }

// Key is "user:thread" with the defaults applied: the scope of a stdio
// session.
func (s Scope) Key() string { return s.User() + ":" + s.Thread() }

func orDefault(id string) string {
	if id == "" {
		return DefaultScopeID
	}
	return id
}
