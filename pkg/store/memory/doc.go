// Package memory implements store.Store in process memory, for the
// `database.backend: memory` setting: OAuth tokens and personal connections
// live in maps guarded by a mutex and are lost at exit; there is no durable
// task store (every TaskStore method returns store.ErrUnavailable), so task
// toolsets must be refused at startup on this backend.
//
// "Now" is the process clock. Values are copied in and out, so callers never
// share memory with the store.
package memory
