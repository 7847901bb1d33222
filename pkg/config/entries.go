package config

import "encoding/json"

// NamedEntry is one mcpServers entry as written in the file.
type NamedEntry struct {
	Name  string
	Entry json.RawMessage
}

// ServerEntries returns the mcpServers entries of an extensions file's
// bytes, as written (unexpanded), in file order.
func ServerEntries(data []byte) ([]NamedEntry, error) {
	servers, err := serversOf(data)
	if err != nil {
		return nil, err
	}
	out := make([]NamedEntry, 0, len(servers.keys))
	for _, name := range servers.keys {
		entry, err := encodeOrdered(servers.vals[name], false)
		if err != nil {
			return nil, err
		}
		out = append(out, NamedEntry{Name: name, Entry: entry})
	}
	return out, nil
}

// ExpandString applies the loader's whole-string "$VAR" expansion to s in
// this process's environment.
func ExpandString(s string) string { return expandString(s) }
