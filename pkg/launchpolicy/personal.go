package launchpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// PersonalOptions configure [NewPersonal].
type PersonalOptions struct {
	// Settings is config.yaml's personal_connections block, validated.
	Settings config.PersonalConnections
	// WorkspaceRoot is workspace.root; personal children run in
	// <root>/personal/<user hash>.
	WorkspaceRoot string
	// Keyed reports that the API has keys (api.keys): in key-less mode no
	// personal stdio connection is allowed.
	Keyed bool
	// Unisolated runs personal children under this process's own uid, in
	// its PID namespace: no isolation between users at all. Only tests of
	// everything else set it; config.yaml cannot.
	Unisolated bool
}

// Personal is the launch policy of personal stdio connections. It is
// immutable and safe for concurrent use.
type Personal struct {
	off   string // why personal stdio is refused; "" when allowed
	specs []personalSpec
	path  string
	root  string
	uids  *uidMap
	// unisolated: PersonalOptions.Unisolated.
	unisolated bool
}

type personalSpec struct {
	config.LaunchSpec
	patterns map[string]*regexp.Regexp // by place name
	userEnv  map[string]bool
}

// Launch is what a personal stdio connection runs: the exact command line,
// the whole child environment, the working directory and the uid.
type Launch struct {
	// Spec names the launch spec the connection matched.
	Spec    string
	Command string
	Args    []string
	// Env is the child's whole environment: PATH, HOME and TMPDIR/TMP/TEMP
	// (the workspace), the spec's env and the user's permitted variables.
	// Nothing comes from the gateway's environment.
	Env map[string]string
	// Dir is the user's personal workspace (set by [Personal.Launch]).
	Dir string
	// RunAs is the uid and gid of the user's children, set by
	// [Personal.Launch]: the user's own, from
	// personal_connections.uid_range.
	RunAs *mcpclient.Credential
	// Isolate runs the child in namespaces of its own (mcpclient.Spec.Isolate).
	Isolate bool
}

// Apply sets the stdio fields of an mcpclient spec to run l.
func (l *Launch) Apply(spec *mcpclient.Spec) {
	spec.Transport = mcpclient.TransportStdio
	spec.Command, spec.Args, spec.Env, spec.Dir = l.Command, slices.Clone(l.Args), maps.Clone(l.Env), l.Dir
	spec.InheritEnv, spec.EmptyEnv, spec.RunAs, spec.Isolate = false, true, l.RunAs, l.Isolate
}

// NewPersonal builds the policy. It fails, naming the config.yaml field,
// when a launch spec lets users set a refused variable, sets one in both
// env and user_env, or has an invalid pattern.
func NewPersonal(o PersonalOptions) (*Personal, error) {
	s := o.Settings
	p := &Personal{path: cmpOr(s.Path, config.DefaultPersonalPath), root: cmpOr(o.WorkspaceRoot, config.DefaultSettings().Workspace.Root)}
	switch {
	case !s.Stdio:
		p.off = "personal stdio connections are turned off on this deployment (personal_connections.stdio is false)"
	case !o.Keyed:
		p.off = "personal stdio connections are not available without API keys (api.keys is empty)"
	}
	p.unisolated = o.Unisolated
	uids := s.UIDRange
	if uids == (config.UIDRange{}) {
		uids = config.DefaultUIDRange
	}
	if uids.First < 1000 || uids.Count < 1 || !uids.Contains(uids.First+uids.Count-1) || uids.First+uids.Count-1 > 1<<32-3 {
		return nil, fmt.Errorf("personal_connections.uid_range: %d ids from %d is not a range of unprivileged uids", uids.Count, uids.First)
	}
	p.uids = newUIDMap(uids, filepath.Join(p.root, "personal", uidClaimsDir))
	for i, ls := range s.LaunchSpecs {
		f := fmt.Sprintf("personal_connections.launch_specs[%d]", i)
		ps := personalSpec{LaunchSpec: ls, patterns: map[string]*regexp.Regexp{}, userEnv: map[string]bool{}}
		ps.Args = slices.Clone(ls.Args)
		ps.UserArgs = make(map[string]config.UserArg, len(ls.UserArgs))
		for name, ua := range ls.UserArgs {
			if ua.Max == 0 {
				ua.Max = 1 // the default, also when the settings were not validated
			}
			ps.UserArgs[name] = ua
			if ua.Pattern == "" {
				continue
			}
			re, err := regexp.Compile(`^(?:` + ua.Pattern + `)$`)
			if err != nil {
				return nil, fmt.Errorf("%s.user_args.%s.pattern: %w", f, name, err)
			}
			ps.patterns[name] = re
		}
		for j, name := range ls.UserEnv {
			if RefusedEnv(name) {
				return nil, fmt.Errorf("%s.user_env[%d]: users may never set %s: it changes what runs", f, j, name)
			}
			if _, fixed := ls.Env[name]; fixed {
				return nil, fmt.Errorf("%s.user_env[%d]: %s is also set in env", f, j, name)
			}
			ps.userEnv[name] = true
		}
		p.specs = append(p.specs, ps)
	}
	return p, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Enabled reports whether personal stdio connections are allowed at all.
func (p *Personal) Enabled() bool { return p.off == "" }

// Isolation returns why personal stdio children cannot be isolated from
// each other here (not root, no PID or mount namespaces), or nil: then
// [Personal.Launch] refuses every personal stdio server, saying so.
func (p *Personal) Isolation() error {
	if p.unisolated {
		return nil
	}
	return mcpclient.IsolationUnavailable()
}

// Check applies the policy to a parsed personal server: nil, nil for a
// server that is not stdio; an *Error naming the field otherwise, or the
// Launch (without Dir and the workspace variables). In order: the feature
// must be on, no env name may be a refused one, the command and args must
// match a launch spec, and every env name must be in that spec's user_env.
// Errors never carry argument or variable values.
func (p *Personal) Check(srv *config.Server) (*Launch, error) {
	if srv.Type != config.TransportStdio {
		return nil, nil
	}
	name := srv.Name
	if p.off != "" {
		return nil, &Error{Server: name, Field: "type", Value: config.TransportStdio,
			Message: fmt.Sprintf("personal MCP server '%s' cannot use the stdio transport: %s", name, p.off)}
	}
	envNames := slices.Sorted(maps.Keys(srv.Env))
	for _, e := range envNames {
		if RefusedEnv(e) {
			return nil, &Error{Server: name, Field: "env", Value: e,
				Message: fmt.Sprintf("personal MCP server '%s' sets environment variable '%s', which changes what runs; personal connections may not set it", name, e)}
		}
	}
	var sameCommand []string
	for i := range p.specs {
		ps := &p.specs[i]
		if ps.Command != srv.Command {
			continue
		}
		sameCommand = append(sameCommand, ps.Name)
		if !ps.matchArgs(srv.Args) {
			continue
		}
		env := map[string]string{"PATH": p.path}
		maps.Copy(env, ps.Env)
		for _, e := range envNames {
			if !ps.userEnv[e] {
				return nil, &Error{Server: name, Field: "env", Value: e,
					Message: fmt.Sprintf("personal MCP server '%s' sets environment variable '%s', which launch spec '%s' does not permit (permitted: %s)",
						name, e, ps.Name, listOrNone(ps.UserEnv))}
			}
			env[e] = srv.Env[e]
		}
		return &Launch{Spec: ps.Name, Command: ps.Command, Args: slices.Clone(srv.Args), Env: env}, nil
	}
	if len(sameCommand) == 0 {
		return nil, &Error{Server: name, Field: "command", Value: srv.Command,
			Message: fmt.Sprintf("personal MCP server '%s' command '%s' is not in any launch spec of this deployment (personal_connections.launch_specs: %s)",
				name, srv.Command, listOrNone(p.specNames()))}
	}
	var forms []string
	for i := range p.specs {
		if p.specs[i].Command == srv.Command {
			forms = append(forms, p.specs[i].form())
		}
	}
	return nil, &Error{Server: name, Field: "args",
		Message: fmt.Sprintf("personal MCP server '%s' args do not match a launch spec for '%s'; allowed: %s",
			name, srv.Command, strings.Join(forms, "; "))}
}

// Launch is Check plus what isolates the user: the user's own uid and gid
// (from personal_connections.uid_range, never another user's), namespaces
// of the child's own, and the user's workspace, <root>/personal/<user
// hash>, owned by that uid with mode 0700, with HOME, TMPDIR, TMP and TEMP
// pointing there. Where isolation cannot be had (Isolation), it refuses
// with an *Error saying why instead of sharing a uid.
func (p *Personal) Launch(user string, srv *config.Server) (*Launch, error) {
	l, err := p.Check(srv)
	if err != nil || l == nil {
		return l, err
	}
	if err := p.Isolation(); err != nil {
		return nil, &Error{Server: srv.Name, Field: "type", Value: config.TransportStdio,
			Message: fmt.Sprintf("personal MCP server '%s' cannot start: personal stdio servers run only isolated from other users (a uid of their own and their own PID namespace), and this service cannot isolate them: %v", srv.Name, err)}
	}
	if !p.unisolated {
		uid, err := p.uids.uid(user)
		if err != nil {
			return nil, fmt.Errorf("personal MCP server '%s': %w", srv.Name, err)
		}
		l.RunAs, l.Isolate = &mcpclient.Credential{UID: uid, GID: uid}, true
	}
	dir, err := p.workspace(user, l.RunAs)
	if err != nil {
		return nil, fmt.Errorf("personal MCP server '%s': %w", srv.Name, err)
	}
	tmp := filepath.Join(dir, "tmp")
	l.Dir = dir
	l.Env["HOME"] = dir
	for _, k := range []string{"TMPDIR", "TMP", "TEMP"} {
		l.Env[k] = tmp
	}
	return l, nil
}

// WorkspaceDir returns user's personal workspace directory (not created).
func (p *Personal) WorkspaceDir(user string) (string, error) {
	root, err := filepath.Abs(p.root)
	if err != nil {
		return "", fmt.Errorf("cannot resolve workspace.root: %w", err)
	}
	sum := sha256.Sum256([]byte("mcpbus personal workspace\x00" + user))
	return filepath.Join(root, "personal", hex.EncodeToString(sum[:16])), nil
}

// workspace creates user's workspace. Under a run-as uid, <root> and
// <root>/personal are made searchable (0711, not listable) and every
// directory above must already be, or the child could not enter its
// workspace: that is an error naming the directory. The workspace is given
// to run, all of it when it belonged to another uid before.
func (p *Personal) workspace(user string, run *mcpclient.Credential) (string, error) {
	dir, err := p.WorkspaceDir(user)
	if err != nil {
		return "", err
	}
	personal := filepath.Dir(dir)
	if err := os.MkdirAll(personal, 0o711); err != nil {
		return "", fmt.Errorf("cannot create the personal workspace root: %w", err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", fmt.Errorf("cannot create the personal workspace: %w", err)
	}
	if run == nil {
		return dir, nil
	}
	root := filepath.Dir(personal)
	for _, d := range []string{root, personal} {
		fi, err := os.Stat(d)
		if err != nil {
			return "", fmt.Errorf("cannot read the workspace directory: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o111); err != nil {
				return "", fmt.Errorf("cannot make the workspace directory searchable: %w", err)
			}
		}
	}
	for d := filepath.Dir(root); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return "", fmt.Errorf("cannot read a parent of workspace.root: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return "", fmt.Errorf("workspace.root's parent %s is not searchable by other uids (mode %o): personal stdio children cannot reach their workspace; move workspace.root or add o+x", d, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if err := giveTree(dir, int(run.UID), int(run.GID), tmp); err != nil {
		return "", fmt.Errorf("cannot give the personal workspace to uid %d: %w", run.UID, err)
	}
	for _, d := range []string{dir, tmp} {
		if err := os.Chmod(d, 0o700); err != nil {
			return "", fmt.Errorf("cannot secure the personal workspace: %w", err)
		}
	}
	return dir, nil
}

func (p *Personal) specNames() []string {
	out := make([]string, len(p.specs))
	for i := range p.specs {
		out[i] = p.specs[i].Name
	}
	return out
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// form renders the spec as a command line with its places, e.g.
// `npx -y pkg@1 {paths: 0..8}`.
func (ps *personalSpec) form() string {
	parts := []string{ps.Command}
	for _, a := range ps.Args {
		if name, ok := config.UserArgPlace(a); ok {
			ua := ps.UserArgs[name]
			parts = append(parts, fmt.Sprintf("{%s: %d..%d}", name, ua.Min, ua.Max))
			continue
		}
		parts = append(parts, fmt.Sprintf("%q", a))
	}
	return strings.Join(parts, " ")
}

// matchArgs reports whether args are the spec's args with each place
// filled by min..max arguments that the place accepts.
func (ps *personalSpec) matchArgs(args []string) bool {
	memo := map[[2]int]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if i == len(ps.Args) {
			return j == len(args)
		}
		key := [2]int{i, j}
		if v, seen := memo[key]; seen {
			return v
		}
		ok := false
		if name, place := config.UserArgPlace(ps.Args[i]); place {
			ua := ps.UserArgs[name]
			for k := 0; k <= ua.Max && j+k <= len(args); k++ {
				if k > 0 && !ps.accepts(name, args[j+k-1]) {
					break
				}
				if k >= ua.Min && match(i+1, j+k) {
					ok = true
					break
				}
			}
		} else {
			ok = j < len(args) && args[j] == ps.Args[i] && match(i+1, j+1)
		}
		memo[key] = ok
		return ok
	}
	return match(0, 0)
}

// accepts reports whether one user argument fits the place: one of its
// values, or a match of its pattern that is not an option (no leading '-')
// and has no NUL.
func (ps *personalSpec) accepts(place, arg string) bool {
	ua := ps.UserArgs[place]
	if len(ua.Values) > 0 {
		return slices.Contains(ua.Values, arg)
	}
	re := ps.patterns[place]
	return re != nil && arg != "" && arg[0] != '-' && !strings.ContainsRune(arg, 0) && re.MatchString(arg)
}

// OptionsFrom returns the options of a deployment's settings: the
// personal_connections block, workspace.root and whether api.keys is set.
func OptionsFrom(s *config.Settings) PersonalOptions {
	return PersonalOptions{Settings: s.PersonalConnections, WorkspaceRoot: s.Workspace.Root, Keyed: len(s.API.Keys) > 0}
}
