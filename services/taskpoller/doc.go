// Package taskpoller is the mcpbus task poller: it owns durable background
// tasks after submit. Any number of pollers run against one database.
//
// Each poller holds a lease owner "<hostname>:<random hex>" and runs a pass
// at start and then every poll interval (at once again when a step claimed a
// full batch): it claims due cancel requests and makes the remote cancel
// calls, claims due polls and calls the status tool (at most
// max_concurrent_polls at a time), then claims due notifications and
// publishes them to JetStream. Status and cancel calls go to the toolcall
// service on mcpbus.internal.call (background credentials only). A result
// is applied only while the poller still holds the row's lease; the state
// machine, backoff and size caps are package tasks.
//
// The service also answers the task API on mcpbus.tasks.list, .get and
// .cancel. Stopping cancels in-flight remote calls and releases their
// leases, so another poller continues at once.
package taskpoller
