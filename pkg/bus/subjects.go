package bus

// Subjects, KV buckets and stream names depend on the deployment namespace:
// see Names. What follows does not.

// KV keys of the config bucket (Names.ConfigBucket).
const (
	KVKeyConfig = "config"
	KVKeyGen    = "generation"
	// KVKeyVirtualServers holds the virtual servers made through the
	// admin API (sharedstate.VirtualRecord), written only by the api.
	KVKeyVirtualServers = "virtual_servers"
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
