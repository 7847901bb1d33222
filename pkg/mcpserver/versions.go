package mcpserver

import "slices"

// Protocol versions of the legacy era, newest first.
const (
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
	Version20250326 = "2025-03-26"
	Version20241105 = "2024-11-05"
)

// LegacyVersions are the versions Legacy speaks, newest first.
var LegacyVersions = []string{Version20251125, Version20250618, Version20250326, Version20241105}

// Negotiate answers a client's initialize: the client's version when
// supported, else the newest supported one (lifecycle, "Version
// Negotiation": the server MUST answer with the requested version if it
// supports it and otherwise SHOULD answer with the latest it supports; the
// client then disconnects if it cannot speak that one). supported is newest
// first.
func Negotiate(requested string, supported []string) string {
	if slices.Contains(supported, requested) {
		return requested
	}
	return supported[0]
}

// Supported reports whether v is a legacy version this server speaks.
func Supported(v string) bool { return slices.Contains(LegacyVersions, v) }
