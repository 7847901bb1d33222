// Package taskpoller is the mcpbus task poller: it owns durable background
// tasks after submit (leased polling, backoff, cancel, size caps and the
// notification outbox). Any number of pollers run against one database.
// This first version starts, connects, registers with NATS micro, checks
// the database and answers health; polling comes with the durable-tasks work.
package taskpoller
