// Package pinning is tool pinning, the "rug pull" guard: a tool's
// definition (name, description, input and output schema, annotations) gets
// a digest over its canonical JSON (digest.go); a definition that differs
// from the approved one is compared with it and flagged for the approver
// (diff.go: added instructions, outbound URLs and e-mail addresses,
// concealment phrases, cross-tool references, a destructiveHint/readOnlyHint
// flip); and the Engine (engine.go) decides, per server policy (off, log,
// require_approval, block), which definition of each tool discovery serves,
// recording what it saw in the database (store.PinStore).
//
// Trust on first use: the first time a server is seen under a policy other
// than off, its tools are approved as they are; after that a new or changed
// tool waits (require_approval: the last approved definition is served, a new
// tool is withheld) or is withheld (block) until an admin approves it.
package pinning
