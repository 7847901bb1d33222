package bus

import (
	"strings"
	"unicode"
)

// Resource URIs as clients see them (docs/federation.md, "Resource URIs").
//
// Every URI an upstream lists or returns (the raw URI) is shown with a
// prefix naming its server: "ui://<server>/" + the raw URI without its
// "ui://" for an MCP Apps resource, "mcpbus://<server>/" + the raw URI for
// anything else. <server> is ServerToken(name): the name itself when it is
// a plain subject token, else "~" and its unpadded base64url. Nothing after
// the prefix is encoded, so the visible URI is exactly as valid as the raw
// one and decoding gives the raw URI back byte for byte.

const (
	// SchemeMCPBus is the scheme of every visible URI but MCP Apps'.
	SchemeMCPBus = "mcpbus://"
	// SchemeUI is MCP Apps' scheme, kept by the visible URI.
	SchemeUI = "ui://"
)

// ServerToken is a server name as a URI authority (and subject token): the
// rule of UserToken.
func ServerToken(server string) string { return UserToken(server) }

// VisibleURI is the URI a client sees for raw on server.
func VisibleURI(server, raw string) string {
	if rest, ok := strings.CutPrefix(raw, SchemeUI); ok {
		return SchemeUI + ServerToken(server) + "/" + rest
	}
	return SchemeMCPBus + ServerToken(server) + "/" + raw
}

// VisibleTemplate is the uriTemplate a client sees for the raw template on
// server: the prefix of VisibleURI, chosen by the template's literal start.
func VisibleTemplate(server, raw string) string { return VisibleURI(server, raw) }

// ErrNotResourceURI is the message of a URI in neither visible form.
const ErrNotResourceURI = "resource URI is not an mcpbus resource URI (mcpbus://<server>/<uri> or ui://<server>/<path>)"

// ParseVisibleURI decodes a visible URI into the server name it names and
// the raw URI. ok is false for a URI in neither form (rules 1 to 3 of
// docs/federation.md); whether the server is one of the caller's is the
// caller's check (UnmappedURI).
func ParseVisibleURI(uri string) (server, raw string, ok bool) {
	var rest string
	ui := false
	switch {
	case hasPrefixFold(uri, SchemeMCPBus):
		rest = uri[len(SchemeMCPBus):]
	case hasPrefixFold(uri, SchemeUI):
		rest, ui = uri[len(SchemeUI):], true
	default:
		return "", "", false
	}
	tok, after, found := strings.Cut(rest, "/")
	if !found || tok == "" {
		return "", "", false
	}
	server, ok = ParseUserToken(tok)
	if !ok {
		return "", "", false
	}
	if ui {
		return server, SchemeUI + after, true
	}
	if after == "" {
		return "", "", false
	}
	return server, after, true
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// UnmappedURI is the not_found error of a visible URI naming server, which
// is not one of the caller's servers. It never quotes the URI (its query
// may carry a token), only the server name, shortened and without control
// characters.
func UnmappedURI(server string) *Error {
	name := SafeServerName(server)
	e := Errorf(CodeNotFound, "resource URI names server '%s', which is not one of your MCP servers", name)
	e.Details = map[string]any{"server": name}
	return e
}

// NotResourceURI is the not_found error of a URI in neither visible form.
func NotResourceURI() *Error { return Errorf(CodeNotFound, ErrNotResourceURI) }

// SafeServerName is a client-supplied server name fit for a message: at
// most 64 characters, control characters dropped.
func SafeServerName(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if unicode.IsControl(r) {
			continue
		}
		if n == 64 {
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
