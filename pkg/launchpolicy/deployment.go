package launchpolicy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// DefaultStdioCommands are always allowed.
var DefaultStdioCommands = []string{"npx", "uvx"}

// Deployment is the stdio launch policy of deployment servers, the
// operator's extensions file (reference §6.4): which commands a stdio server
// may run and which arguments and environment variables are refused because
// they would run arbitrary code. Non-stdio servers pass. Personal
// connections use [Personal] instead.
type Deployment struct {
	allowed []string // sorted, unique
}

// NewDeployment allows npx, uvx and extra.
func NewDeployment(extra []string) Deployment {
	allowed := append(slices.Clone(DefaultStdioCommands), extra...)
	slices.Sort(allowed)
	return Deployment{allowed: slices.Compact(allowed)}
}

// Allowed returns the allowed commands, sorted.
func (p Deployment) Allowed() []string { return slices.Clone(p.allowed) }

// Error is a refusal by a launch policy. Field is "command", "args" or
// "env" (for a personal connection also "env.<NAME>" or "type"); Value is
// the offending command, flag or variable name, never a variable's value.
type Error struct {
	Server  string
	Field   string
	Value   string
	Message string
}

func (e *Error) Error() string { return e.Message }

// UserMessage is Message: written for the author of the definition, it
// carries no variable value (bus.UserMessager).
func (e *Error) UserMessage() string { return e.Message }

// codeEnvVars run code at process start-up.
var codeEnvVars = map[string]bool{
	"BASH_ENV": true, "DYLD_INSERT_LIBRARIES": true, "ENV": true, "LD_AUDIT": true,
	"LD_PRELOAD": true, "NODE_OPTIONS": true, "PERL5OPT": true, "PYTHONHOME": true,
	"PYTHONPATH": true, "PYTHONSTARTUP": true, "RUBYOPT": true,
}

// execShort and execLong are the code-executing flags; long flags match
// case-insensitively, short ones case-sensitively.
var (
	execShort = map[string]bool{"-c": true, "-e": true}
	execLong  = map[string]bool{"--call": true, "--eval": true, "--print": true, "--shell": true, "--node-arg": true, "--node-options": true}
)

// npx options that take no value; any other npx option consumes one.
var npxNoValue = map[string]bool{"-y": true, "--yes": true, "--no": true, "-q": true, "--quiet": true, "--no-install": true, "--ignore-existing": true}

// Check applies the policy to a parsed server: to the entry as written
// (CheckEntry on s.Raw), or to its parsed fields when it has no raw entry.
func (p Deployment) Check(s *config.Server) error {
	if len(s.Raw) > 0 {
		return p.CheckEntry(s.Name, s.Raw)
	}
	if s.Type != config.TransportStdio {
		return nil
	}
	return p.check(s.Name, s.Command, s.Args, slices.Sorted(maps.Keys(s.Env)))
}

// CheckServers applies the policy to every mcpServers entry of an
// extensions file's bytes, as written, or only to the entry named only.
func (p Deployment) CheckServers(data []byte, only string) error {
	return config.EachServerEntry(data, only, p.CheckEntry)
}

// CheckEntry applies the policy to one server entry as written: the raw
// command (so "$CMD" is refused by its shape), the raw args and, expanded in
// this process's environment, the args again, and the env names. An entry
// whose type (or transport) is set to anything but stdio passes; a "$VAR"
// type counts as stdio unless it expands to another transport. Entries that
// are not objects pass (the schema check refuses them).
func (p Deployment) CheckEntry(name string, entry json.RawMessage) error {
	var m map[string]any
	if json.Unmarshal(entry, &m) != nil {
		return nil
	}
	t, _ := m["type"].(string)
	if t == "" {
		t, _ = m["transport"].(string)
	}
	if strings.HasPrefix(t, "$") {
		t = config.ExpandString(t)
	}
	if t != "" && t != config.TransportStdio {
		return nil
	}
	command, _ := m["command"].(string)
	var args, expanded []string
	if list, ok := m["args"].([]any); ok {
		for _, a := range list {
			if str, ok := a.(string); ok {
				args = append(args, str)
				expanded = append(expanded, config.ExpandString(str))
			}
		}
	}
	var envNames []string
	if env, ok := m["env"].(map[string]any); ok {
		envNames = slices.Sorted(maps.Keys(env))
	}
	if err := p.check(name, command, args, envNames); err != nil {
		return err
	}
	return p.check(name, command, expanded, envNames)
}

// CheckStdio applies the policy to a command line and env names of server
// name (already known to use the stdio transport).
func (p Deployment) CheckStdio(name, command string, args, envNames []string) error {
	return p.check(name, command, args, envNames)
}

func (p Deployment) check(name, command string, args, envNames []string) error {
	if command == "" {
		return &Error{Server: name, Field: "command",
			Message: fmt.Sprintf("MCP server '%s' with stdio transport requires a command.", name)}
	}
	if strings.TrimSpace(command) != command || strings.ContainsAny(command, "/\\;|&`$<>\n\r \t\v\f") || strings.IndexFunc(command, isSpace) >= 0 {
		return &Error{Server: name, Field: "command", Value: command,
			Message: fmt.Sprintf("MCP server '%s' command must be a single executable name; put parameters in args instead.", name)}
	}
	if !slices.Contains(p.allowed, command) {
		return &Error{Server: name, Field: "command", Value: command,
			Message: fmt.Sprintf("MCP server '%s' uses disallowed stdio command '%s'. Allowed commands: %s. Configure %s to extend this list.",
				name, command, strings.Join(p.allowed, ", "), config.EnvStdioAllowlist)}
	}
	if flag := execFlag(command, args); flag != "" {
		return &Error{Server: name, Field: "args", Value: flag,
			Message: fmt.Sprintf("MCP server '%s' passes '%s' to '%s', which would run arbitrary code. Point the server at a package or module instead.", name, flag, command)}
	}
	for _, e := range envNames {
		if strings.ToUpper(strings.TrimSpace(e)) == "PATH" {
			// The command is looked up on the child's PATH: setting it would
			// run any binary under an allowlisted name.
			return &Error{Server: name, Field: "env", Value: e,
				Message: fmt.Sprintf("MCP server '%s' sets environment variable '%s', which would change which program '%s' runs.", name, e, command)}
		}
		if codeEnvVars[strings.ToUpper(strings.TrimSpace(e))] {
			return &Error{Server: name, Field: "env", Value: e,
				Message: fmt.Sprintf("MCP server '%s' sets environment variable '%s', which would run arbitrary code at process startup.", name, e)}
		}
	}
	return nil
}

func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xA0:
		return true
	}
	return r > 0xFF && strings.ContainsRune("\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000", r)
}

// flagName splits "--f=v" into "--f" and reports whether a value was attached.
func flagName(arg string) (string, bool) {
	if i := strings.IndexByte(arg, '='); i > 0 {
		return arg[:i], true
	}
	return arg, false
}

// isExec reports whether a single flag (no cluster) is a code-executing one.
func isExec(flag string, shortP, longOnly bool) bool {
	if strings.HasPrefix(flag, "--") {
		return execLong[strings.ToLower(flag)]
	}
	if longOnly {
		return false
	}
	return execShort[flag] || (shortP && flag == "-p")
}

// execFlag returns the first code-executing flag in args as the launcher
// would read them, or "".
func execFlag(command string, args []string) string {
	switch command {
	case "npx":
		return npxExecFlag(args)
	case "uvx":
		return uvxExecFlag(args)
	default:
		for _, a := range args {
			if f := anyExecFlag(a); f != "" {
				return f
			}
		}
		return ""
	}
}

// anyExecFlag checks one argument of a command other than npx and uvx: -p is
// denied too and short clusters are split (-pe counts as -p).
func anyExecFlag(arg string) string {
	if !strings.HasPrefix(arg, "-") || arg == "-" || arg == "--" {
		return ""
	}
	name, _ := flagName(arg)
	if strings.HasPrefix(name, "--") {
		if isExec(name, true, false) {
			return name
		}
		return ""
	}
	for _, r := range name[1:] {
		if f := "-" + string(r); isExec(f, true, false) {
			return f
		}
	}
	return ""
}

// npxExecFlag checks npx's own option region: it ends at "--", "-" or the
// first positional; an unknown option consumes a value; -p is --package.
// Short clusters (-yc) are split, the last letter deciding the arity.
func npxExecFlag(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			return ""
		}
		name, attached := flagName(a)
		last := name
		if !strings.HasPrefix(name, "--") && len(name) > 2 {
			for _, r := range name[1:] {
				if f := "-" + string(r); isExec(f, false, false) {
					return f
				}
			}
			last = "-" + name[len(name)-1:]
		} else if isExec(name, false, false) {
			return name
		}
		if last == "-p" || last == "--package" {
			if !attached {
				i++
			}
			continue
		}
		if !attached && !npxNoValue[strings.ToLower(last)] && !strings.HasPrefix(strings.ToLower(last), "--no-") {
			i++
		}
	}
	return ""
}

// uvxExecFlag checks uvx's own option region: -c and -p take values, other
// options consume nothing, and only the long exec spellings are denied.
func uvxExecFlag(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			return ""
		}
		name, attached := flagName(a)
		if isExec(name, false, true) {
			return name
		}
		if (name == "-c" || name == "-p") && !attached {
			i++
		}
	}
	return ""
}
