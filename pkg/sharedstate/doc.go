// Package sharedstate carries the state every replica must agree on through
// the JetStream KV bucket bus.Names.ConfigBucket: the extensions config (key "config",
// published by the process that owns the file), the cache generation (key
// "generation", bumped with compare-and-set by a cache reset) and the
// virtual servers made through the admin API (key "virtual_servers",
// written whole with compare-and-set by the api; virtual.go).
//
// A Watcher keeps the latest of both and calls its subscribers on every
// change, including the values present when it starts, so a replica that was
// down or starts late catches up. Services never share a file system.
//
// A Watcher may also acknowledge the generations it applies in the presence
// bucket (AckTo), and a cache reset counts those acknowledgements per
// service (AwaitAcks; acks.go).
package sharedstate
