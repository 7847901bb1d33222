package bus

// The audit stream's names: tool call records on
// mcpbus.audit.call.<user token>.<tool token>, config change records on
// mcpbus.audit.config.<user token>, records of requests dropped for their
// reply subject on mcpbus.audit.reply_dropped.<user token>
// (AuditReplyDropped, replyguard.go), all kept in the stream MCPBUS_AUDIT
// (with the deployment's namespace, like every other name).

// AuditAll matches every audit subject.
func (n Names) AuditAll() string { return n.subject("mcpbus.audit.>") }

// AuditCall is the subject of a tool call record of userID calling tool
// (both as subject tokens, see UserToken).
func (n Names) AuditCall(userID, tool string) string {
	return n.subj + "mcpbus.audit.call." + UserToken(userID) + "." + UserToken(tool) // one concatenation: one allocation
}

// AuditConfig is the subject of a config change record made by userID.
func (n Names) AuditConfig(userID string) string {
	return n.subj + "mcpbus.audit.config." + UserToken(userID)
}

// AuditFilter are the subject filters of records of kind ("call",
// "config", "reply_dropped" or "" for all), user and tool ("" for any; a tool selects call
// records only).
func (n Names) AuditFilter(kind, userID, tool string) []string {
	tok := func(s string) string {
		if s == "" {
			return "*"
		}
		return UserToken(s)
	}
	call := n.subject("mcpbus.audit.call." + tok(userID) + "." + tok(tool))
	cfg := n.subject("mcpbus.audit.config." + tok(userID))
	dropped := n.subject("mcpbus.audit." + KindReplyDropped + "." + tok(userID))
	switch {
	case kind == "call" || tool != "":
		return []string{call}
	case kind == "config":
		return []string{cfg}
	case kind == KindReplyDropped:
		return []string{dropped}
	case userID == "":
		return []string{n.AuditAll()}
	}
	return []string{call, cfg, dropped}
}

// AuditStream is the JetStream stream of audit records.
func (n Names) AuditStream() string { return n.js + "MCPBUS_AUDIT" }
