package config

import (
	"fmt"
	"regexp"
	"strings"
)

// PersonalConnections bounds users' own MCP server definitions and what
// their stdio servers may run.
type PersonalConnections struct {
	// MaxPerUser is how many personal connections one user may keep
	// (1..1000, default 20); replacing one by name does not count twice.
	MaxPerUser int `yaml:"max_per_user"`
	// Stdio allows personal stdio connections at all. Default false; never
	// in key-less mode (no api.keys).
	Stdio bool `yaml:"stdio"`
	// LaunchSpecs are the exact command lines a personal stdio connection
	// may use. Default none (nothing matches).
	LaunchSpecs []LaunchSpec `yaml:"launch_specs"`
	// Path is the PATH of personal stdio children (a bare spec command is
	// looked up there). Default /usr/local/bin:/usr/bin:/bin.
	Path string `yaml:"path"`
	// UIDRange is where each user's personal stdio children get a uid of
	// their own (the same number as gid), never shared with another user.
	UIDRange UIDRange `yaml:"uid_range"`
	// RunAs would give every user's children one uid: setting it is
	// refused, naming uid_range.
	RunAs *RunAs `yaml:"run_as"`
	// MaxSessionInitTimeoutSeconds caps a personal connection's
	// session_init_timeout; null (disabled) means this maximum. Default 60.
	MaxSessionInitTimeoutSeconds int `yaml:"max_session_init_timeout_seconds"`
	// MaxToolCallTimeoutSeconds caps a personal connection's
	// tool_call_timeout; null (no limit) means this maximum. Default 300.
	MaxToolCallTimeoutSeconds int `yaml:"max_tool_call_timeout_seconds"`
}

// RunAs is the refused personal_connections.run_as block.
type RunAs struct {
	UID int `yaml:"uid"`
	GID int `yaml:"gid"`
}

// UIDRange is Count uids (and gids of the same numbers) from First,
// reserved for personal stdio children: no account of the host may use
// them.
type UIDRange struct {
	First int64 `yaml:"first"`
	Count int64 `yaml:"count"`
}

// Contains reports whether id is in the range.
func (r UIDRange) Contains(id int64) bool { return id >= r.First && id-r.First < r.Count }

// LaunchSpec is one command line a personal stdio connection may run. An
// args element written "{name}" is a place where the user adds arguments,
// described by UserArgs[name]; every other element must be given as is.
type LaunchSpec struct {
	// Name identifies the spec in errors and logs.
	Name    string   `yaml:"name"`
	Command string   `yaml:"command"`
	Args    []string `yaml:"args"`
	// UserArgs describes each "{name}" place of Args.
	UserArgs map[string]UserArg `yaml:"user_args"`
	// Env is set in the child as written (the operator's values; users
	// cannot override them).
	Env map[string]string `yaml:"env"`
	// UserEnv names the variables a user may set in the connection's env.
	UserEnv []string `yaml:"user_env"`
}

// UserArg is one place where a user adds arguments: Min to Max of them
// (default 0 to 1), each matching Pattern in full (and not starting with
// "-") or equal to one of Values. Exactly one of Pattern and Values is set.
type UserArg struct {
	Pattern string   `yaml:"pattern"`
	Values  []string `yaml:"values"`
	Min     int      `yaml:"min"`
	Max     int      `yaml:"max"`
}

// MaxUserArgs bounds UserArg.Max.
const MaxUserArgs = 64

// DefaultPersonalPath is personal_connections.path's default.
const DefaultPersonalPath = "/usr/local/bin:/usr/bin:/bin"

// DefaultUIDRange is personal_connections.uid_range's default: 1,000,000
// ids from 2,000,000,000, far above the accounts and the subordinate id
// ranges (/etc/subuid) that hosts usually allocate.
var DefaultUIDRange = UIDRange{First: 2_000_000_000, Count: 1_000_000}

// maxUID is the largest uid a range may reach: (uid_t)-1 and -2 are
// special to the kernel and to NFS.
const maxUID = 1<<32 - 3

// specNamePattern bounds launch spec and user_args names.
var specNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// userArgPlace returns name when arg is a "{name}" place.
func userArgPlace(arg string) (string, bool) {
	if len(arg) > 2 && arg[0] == '{' && arg[len(arg)-1] == '}' {
		return arg[1 : len(arg)-1], true
	}
	return "", false
}

// UserArgPlace reports whether a spec's args element is a "{name}" place
// and returns its name.
func UserArgPlace(arg string) (string, bool) { return userArgPlace(arg) }

// personal validates personal_connections and fills each user_args max.
// Which variable names are refused is the launch policy's check
// (launchpolicy.NewPersonal), made when a service starts.
func (v *settingsValidator) personal(p *PersonalConnections) {
	if strings.TrimSpace(p.Path) == "" {
		v.errorf("personal_connections.path", "must not be empty")
	} else {
		for dir := range strings.SplitSeq(p.Path, ":") {
			if !strings.HasPrefix(dir, "/") {
				v.errorf("personal_connections.path", "every entry must be an absolute directory, got %q", dir)
				break
			}
		}
	}
	if p.RunAs != nil {
		v.errorf("personal_connections.run_as", "is refused: personal stdio children of different users must not share one uid; remove it and reserve personal_connections.uid_range instead")
	}
	switch r := p.UIDRange; {
	case r.First < 1000:
		v.errorf("personal_connections.uid_range.first", "must be 1000 or more (below are system accounts), got %d", r.First)
	case r.Count < 1:
		v.errorf("personal_connections.uid_range.count", "must be 1 or more, got %d", r.Count)
	case r.First+r.Count-1 > maxUID:
		v.errorf("personal_connections.uid_range", "must end at %d or below, got %d..%d", maxUID, r.First, r.First+r.Count-1)
	case r.Contains(65534) || r.Contains(65535):
		v.errorf("personal_connections.uid_range", "must not contain 65534 or 65535 (nobody), got %d..%d", r.First, r.First+r.Count-1)
	}
	names := map[string]int{}
	for i := range p.LaunchSpecs {
		s := &p.LaunchSpecs[i]
		f := fmt.Sprintf("personal_connections.launch_specs[%d]", i)
		if !specNamePattern.MatchString(s.Name) {
			v.errorf(f+".name", "must be 1 to 64 letters, digits, '_' or '-', got %q", s.Name)
		} else if j, dup := names[s.Name]; dup {
			v.errorf(f+".name", "repeats personal_connections.launch_specs[%d].name %q", j, s.Name)
		} else {
			names[s.Name] = i
		}
		if s.Command == "" || strings.TrimSpace(s.Command) != s.Command || strings.ContainsAny(s.Command, " \t\r\n") {
			v.errorf(f+".command", "must be one executable name or absolute path, got %q", s.Command)
		} else if strings.ContainsRune(s.Command, '/') && !strings.HasPrefix(s.Command, "/") {
			v.errorf(f+".command", "must be a bare name (looked up in personal_connections.path) or an absolute path, got %q", s.Command)
		}
		used := map[string]bool{}
		for j, a := range s.Args {
			name, ok := userArgPlace(a)
			if !ok {
				continue
			}
			af := fmt.Sprintf("%s.args[%d]", f, j)
			switch _, declared := s.UserArgs[name]; {
			case used[name]:
				v.errorf(af, "repeats the place {%s}", name)
			case !declared:
				v.errorf(af, "names the place {%s}, which user_args does not describe", name)
			}
			used[name] = true
		}
		for name, ua := range s.UserArgs {
			uf := f + ".user_args." + name
			if !used[name] {
				v.errorf(uf, "is not used as {%s} in args", name)
			}
			if (ua.Pattern == "") == (len(ua.Values) == 0) {
				v.errorf(uf, "must set exactly one of pattern and values")
			}
			if ua.Pattern != "" {
				if _, err := regexp.Compile(ua.Pattern); err != nil {
					v.errorf(uf+".pattern", "is not a valid regular expression: %v", err)
				}
			}
			if ua.Max == 0 {
				ua.Max = 1
			}
			if ua.Min < 0 || ua.Max < ua.Min || ua.Max > MaxUserArgs {
				v.errorf(uf, "needs 0 <= min <= max <= %d, got min %d max %d", MaxUserArgs, ua.Min, ua.Max)
			}
			s.UserArgs[name] = ua
		}
		for j, name := range s.UserEnv {
			if name == "" || strings.ContainsAny(name, "= \t\r\n\x00") {
				v.errorf(fmt.Sprintf("%s.user_env[%d]", f, j), "must be a variable name, got %q", name)
			}
		}
		for name := range s.Env {
			if name == "" || strings.ContainsAny(name, "= \t\r\n\x00") {
				v.errorf(f+".env", "has an invalid variable name %q", name)
			}
		}
	}
}
