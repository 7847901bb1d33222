package audit

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"sort"
)

// ConfigChanges compares two extensions config files (raw JSON, either may
// be empty) and returns what a write changed: per server added, removed,
// enabled, disabled or changed (with the keys that differ, one level into
// objects such as headers and env), and, as a Change with no server, the
// other top-level keys (mcpInterceptors, skills, …) that differ. Only names
// are returned, never values. Servers are in name order.
func ConfigChanges(before, after []byte) []Change {
	b, a := decodeTop(before), decodeTop(after)
	bs, as := serversOf(b), serversOf(a)
	var out []Change
	for _, name := range sortedKeys(bs, as) {
		old, hadOld := bs[name]
		cur, hasCur := as[name]
		switch {
		case !hadOld:
			out = append(out, Change{Server: name, Op: "added"})
		case !hasCur:
			out = append(out, Change{Server: name, Op: "removed"})
		default:
			keys := diffKeys(old, cur)
			switch {
			case len(keys) == 0:
			case slices.Equal(keys, []string{"enabled"}):
				op := "disabled"
				if e, _ := cur["enabled"].(bool); e || cur["enabled"] == nil {
					op = "enabled"
				}
				out = append(out, Change{Server: name, Op: op})
			default:
				out = append(out, Change{Server: name, Op: "changed", Keys: keys})
			}
		}
	}
	delete(b, "mcpServers")
	delete(a, "mcpServers")
	if keys := diffKeys(b, a); len(keys) > 0 {
		top := keys[:0]
		for _, k := range keys {
			top = append(top, firstSegment(k))
		}
		out = append(out, Change{Op: "changed", Keys: slices.Compact(top)})
	}
	return out
}

func decodeTop(raw []byte) map[string]any {
	m := map[string]any{}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &m)
	}
	return m
}

func serversOf(top map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	srv, _ := top["mcpServers"].(map[string]any)
	for name, v := range srv {
		if e, ok := v.(map[string]any); ok {
			out[name] = e
		} else {
			out[name] = map[string]any{"": v}
		}
	}
	return out
}

// diffKeys returns the keys whose values differ, and for two objects under
// one key the subkeys that differ ("headers.Authorization"), sorted.
func diffKeys(old, cur map[string]any) []string {
	var keys []string
	for _, k := range sortedKeys(old, cur) {
		ov, oOK := old[k]
		cv, cOK := cur[k]
		if oOK == cOK && reflect.DeepEqual(ov, cv) {
			continue
		}
		om, omOK := ov.(map[string]any)
		cm, cmOK := cv.(map[string]any)
		if omOK && cmOK {
			for _, sub := range sortedKeys(om, cm) {
				if !reflect.DeepEqual(om[sub], cm[sub]) || (om[sub] == nil) != (cm[sub] == nil) {
					keys = append(keys, k+"."+sub)
				}
			}
			continue
		}
		keys = append(keys, k)
	}
	return keys
}

func sortedKeys[V any](ms ...map[string]V) []string {
	set := map[string]bool{}
	for _, m := range ms {
		for k := range maps.Keys(m) {
			set[k] = true
		}
	}
	out := slices.Collect(maps.Keys(set))
	sort.Strings(out)
	return out
}

func firstSegment(k string) string {
	for i := range len(k) {
		if k[i] == '.' {
			return k[:i]
		}
	}
	return k
}
