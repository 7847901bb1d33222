package config

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// ServerEntries decodes an extensions file's bytes in order (orderedjson) and returns its mcpServers object (empty
// when absent). The top level must be an object and mcpServers, when
// present and not null, an object.
func ServerEntries(data []byte) (*orderedjson.Object, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return orderedjson.NewObject(), nil
	}
	top, err := DecodeTop(data)
	if err != nil {
		return nil, err
	}
	v, ok := top.Get("mcpServers")
	if !ok || v == nil {
		return orderedjson.NewObject(), nil
	}
	servers, ok := v.(*orderedjson.Object)
	if !ok {
		return nil, fmt.Errorf("extensions config: mcpServers must be a JSON object, got %s", orderedjson.Kind(v))
	}
	return servers, nil
}

// DecodeTop decodes an extensions file's bytes in order; the top level
// must be an object.
func DecodeTop(data []byte) (*orderedjson.Object, error) {
	v, err := orderedjson.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("extensions config is not valid JSON: %w", err)
	}
	top, ok := v.(*orderedjson.Object)
	if !ok {
		return nil, fmt.Errorf("extensions config: the top level must be a JSON object, got %s", orderedjson.Kind(v))
	}
	return top, nil
}

// IsKnownServerKey reports whether k is a typed key of an mcpServers entry
// (any other key is kept verbatim as an extra).
func IsKnownServerKey(k string) bool { return knownServerKeys[k] }
