package bus

// Subjects, KV buckets and stream names depend on the deployment namespace:
// see Names. What follows does not.

// KV keys of the config bucket (Names.ConfigBucket).
const (
	KVKeyConfig = "config"
	KVKeyGen    = "generation"
)

// Headers.
const (
	HeaderRequestID = "Mcpbus-Request-Id"
	HeaderError     = "Mcpbus-Error"
)

// Service base names; Names.Service gives the name registered with NATS
// micro, Names.Health the health subject.
const (
	ServiceDiscovery  = "mcpbus-discovery"
	ServiceToolcall   = "mcpbus-toolcall"
	ServiceTaskpoller = "mcpbus-taskpoller"
	ServiceTokens     = "mcpbus-tokens"
	ServiceAPI        = "mcpbus-api"
)

// ServiceInboxPrefix is the reply inbox prefix of a service's NATS
// connections ("_INBOX.mcpbus-api"): the service's NATS user (named after
// the service base name in deploy/nats/accounts.conf) may subscribe there
// and nowhere else under _INBOX, so no service reads another's replies.
// It stays under "_INBOX." (ReplyAllowed accepts it) and no agent worker's
// inbox ("_INBOX_<user>.") can equal it.
func ServiceInboxPrefix(service string) string { return "_INBOX." + service }
