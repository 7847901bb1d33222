package config

import (
	"encoding/json"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/orderedjson"
)

// ExpandString applies the loader's whole-string "$VAR" expansion to s in
// this process's environment.
func ExpandString(s string) string { return expandString(s) }

// IsPlaceholder reports whether s is a whole-string "$VAR" value (it names
// a variable of the service's environment; its value is judged expanded).
func IsPlaceholder(s string) bool { return strings.HasPrefix(s, "$") }

func placeholder(s string) bool { return IsPlaceholder(s) }

// EachServerEntry calls check on every mcpServers entry of an extensions file's
// bytes, as written, in file order, or only on the entry named only; it
// stops at the first error.
func EachServerEntry(data []byte, only string, check func(name string, entry json.RawMessage) error) error {
	servers, err := ServerEntries(data)
	if err != nil {
		return err
	}
	for _, name := range servers.Keys() {
		if only != "" && name != only {
			continue
		}
		v, _ := servers.Get(name)
		entry, err := orderedjson.Encode(v, false)
		if err != nil {
			return err
		}
		if err := check(name, entry); err != nil {
			return err
		}
	}
	return nil
}
