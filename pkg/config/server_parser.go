package config

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// serverParser collects the problems of one mcpServers entry. Messages name
// fields and keys only, never a value that could be a credential.
type serverParser struct {
	file, name string
	problems   []Problem
	failed     bool
}

func (p *serverParser) errorf(field, format string, args ...any) {
	p.failed = true
	p.add(field, SeverityError, fmt.Sprintf(format, args...))
}

func (p *serverParser) warnf(field, format string, args ...any) {
	p.add(field, SeverityWarning, fmt.Sprintf(format, args...))
}

func (p *serverParser) add(field, severity, msg string) {
	p.problems = append(p.problems, Problem{File: p.file, Server: p.name, Field: field, Message: msg, Severity: severity})
}

// str reads an optional string; absent and null give ("", false).
func (p *serverParser) str(m map[string]any, key, field string) (string, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		p.errorf(field, "must be a string, got %s", jsonKind(v))
		return "", false
	}
	return s, true
}

// boolean reads an optional boolean; absent and null give def.
func (p *serverParser) boolean(m map[string]any, key, field string, def bool) bool {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		p.errorf(field, "must be true or false, got %s", jsonKind(v))
		return def
	}
	return b
}

// object reads an optional object; absent and null give (nil, false).
func (p *serverParser) object(v any, field string) (map[string]any, bool) {
	if v == nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.errorf(field, "must be an object, got %s", jsonKind(v))
		return nil, false
	}
	return m, true
}

// strList reads an optional list of strings.
func (p *serverParser) strList(m map[string]any, key, field string) []string {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		p.errorf(field, "must be a list of strings, got %s", jsonKind(v))
		return nil
	}
	out := make([]string, 0, len(list))
	for i, item := range list {
		s, ok := item.(string)
		if !ok {
			p.errorf(fmt.Sprintf("%s[%d]", field, i), "must be a string, got %s", jsonKind(item))
			continue
		}
		out = append(out, s)
	}
	return out
}

// strMap reads an optional object of strings. Errors name the key only.
func (p *serverParser) strMap(m map[string]any, key, field string) map[string]string {
	obj, ok := p.object(m[key], field)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(obj))
	for _, k := range sortedKeys(obj) {
		s, ok := obj[k].(string)
		if !ok {
			p.errorf(field, "the value for key '%s' must be a string, got %s", k, jsonKind(obj[k]))
			continue
		}
		out[k] = s
	}
	return out
}

// number reads an optional JSON number as float64.
func (p *serverParser) number(v any, field, what string) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		p.errorf(field, "must be %s, got %s", what, jsonKind(v))
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		p.errorf(field, "must be %s, got an out-of-range number", what)
		return 0, false
	}
	return f, true
}

// integer reads an optional whole number; absent and null give (0, false).
// The result saturates at ±1e9 so later range checks stay meaningful.
func (p *serverParser) integer(m map[string]any, key, field string) (int, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return 0, false
	}
	f, ok := p.number(v, field, "an integer")
	if !ok {
		return 0, false
	}
	if f != math.Trunc(f) {
		p.errorf(field, "must be an integer, got a fraction")
		return 0, false
	}
	return int(math.Max(-1e9, math.Min(1e9, f))), true
}

// seconds reads a timeout in seconds (fractions allowed). Absent gives def,
// null gives 0 (no limit / disabled). Negative values are errors.
func (p *serverParser) seconds(m map[string]any, key string, def time.Duration) time.Duration {
	v, ok := m[key]
	if !ok {
		return def
	}
	if v == nil {
		return 0
	}
	f, ok := p.number(v, key, "a number of seconds or null")
	if !ok {
		return def
	}
	if f < 0 {
		p.errorf(key, "must not be negative")
		return def
	}
	if f > float64(math.MaxInt64)/float64(time.Second) {
		p.errorf(key, "is too large")
		return def
	}
	return time.Duration(math.Round(f * float64(time.Second)))
}

// unknownKeys reports keys of m outside allowed. strict keys are errors,
// others warnings (the key is ignored).
func (p *serverParser) unknownKeys(m map[string]any, field string, strict bool, allowed ...string) {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	for _, k := range sortedKeys(m) {
		if ok[k] {
			continue
		}
		msg := fmt.Sprintf("unknown key (allowed: %s)", strings.Join(allowed, ", "))
		if strict {
			p.errorf(field+"."+k, "%s", msg)
		} else {
			p.warnf(field+"."+k, "%s; ignored", msg)
		}
	}
}

// headerSpellings rejects two keys naming the same HTTP header.
func (p *serverParser) headerSpellings(field string, headers map[string]string) {
	first := map[string]string{}
	for _, h := range sortedKeys(headers) {
		lower := strings.ToLower(h)
		if prev, dup := first[lower]; dup {
			p.errorf(field, "maps the same HTTP header under two spellings ('%s' and '%s'); header names are case-insensitive, so keep only one", prev, h)
			continue
		}
		first[lower] = h
	}
}

// onMissing reads on_missing: deny (default) or passthrough.
func (p *serverParser) onMissing(m map[string]any, field string) string {
	v, _ := p.str(m, "on_missing", field)
	switch v {
	case "":
		return OnMissingDeny
	case OnMissingDeny, OnMissingPassthrough:
		return v
	default:
		p.errorf(field, "must be 'deny' or 'passthrough', got %q", v)
		return OnMissingDeny
	}
}
