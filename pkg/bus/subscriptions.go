package bus

// Resource subscriptions (docs/federation.md §5): a stream holder (an api
// replica holding a session's stream or a subscriptions/listen, a
// `mcpbus stdio` process) subscribes a visible URI for a subscriber id of
// its own; toolcall keeps one upstream subscription per (connection, raw
// URI) and publishes each upstream notifications/resources/updated once
// per subscribed user on ResourcesUpdated(user).

// The subscription verbs (plain and per-user subjects, served by toolcall).
const (
	VerbResourcesSubscribe   Verb = "resources.subscribe"
	VerbResourcesUnsubscribe Verb = "resources.unsubscribe"
)

func (n Names) ResourcesSubscribe() string   { return n.Plain(VerbResourcesSubscribe) }
func (n Names) ResourcesUnsubscribe() string { return n.Plain(VerbResourcesUnsubscribe) }

// ResourcesUpdated is the subject a user's resource updates are published
// on: mcpbus.resources.updated.<user token> (UserToken), so a user's NATS
// identity may be allowed its own subject only.
func (n Names) ResourcesUpdated(userID string) string {
	return n.subject("mcpbus.resources.updated." + UserToken(userID))
}

// ResourcesUpdatedAll is every user's ResourcesUpdated (what api replicas
// subscribe).
func (n Names) ResourcesUpdatedAll() string { return n.subject("mcpbus.resources.updated.*") }

// SubscriptionTTLSeconds is how long a subscriber's subscription lasts
// without being sent again; SubscriptionRefreshSeconds is how often a stream holder
// sends it again while its stream is open.
const (
	SubscriptionTTLSeconds     = 60
	SubscriptionRefreshSeconds = 20
)

// ResourcesSubscribeRequest is the body of mcpbus.resources.subscribe and
// .unsubscribe. Subscriber is an opaque id the stream holder chose (never
// a session id itself): one stream's subscriptions.
type ResourcesSubscribeRequest struct {
	URI        string `json:"uri"`
	Subscriber string `json:"subscriber"`
	UserID     string `json:"user_id,omitempty"`
	ThreadID   string `json:"thread_id,omitempty"`
}

// ResourcesSubscribeReply is the reply of mcpbus.resources.subscribe,
// sent once the upstream subscription is in place: the server, the
// visible URI and the connection (an opaque digest naming the upstream
// connection, no credential). .unsubscribe replies {}.
type ResourcesSubscribeReply struct {
	Server     string `json:"server,omitempty"`
	URI        string `json:"uri,omitempty"`
	Connection string `json:"connection,omitempty"`
}

// ResourceUpdated is published on ResourcesUpdated(user) for each user
// subscribed to a resource an upstream said changed: URI is the visible
// URI, RawURI the upstream's, Subscribers the user's subscriber ids
// subscribed to it on that connection.
type ResourceUpdated struct {
	Connection  string   `json:"connection"`
	Server      string   `json:"server"`
	URI         string   `json:"uri"`
	RawURI      string   `json:"raw_uri"`
	Subscribers []string `json:"subscribers"`
}
