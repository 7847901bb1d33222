package launchpolicy

import "strings"

// refusedEnvExact and refusedEnvPrefixes are the variables no user may set
// in a personal connection, whatever a launch spec permits: each changes
// which program runs, what it loads at start-up, or where its launcher reads
// its configuration (npm reads every npm_config_* variable as an option, so
// npm_config_call is `npx -c`). Names compare case-insensitively.
var (
	refusedEnvExact = map[string]bool{
		"PATH": true, "ENV": true, "BASH_ENV": true, "SHELL": true, "SHELLOPTS": true, "BASHOPTS": true,
		"IFS": true, "PS4": true, "PROMPT_COMMAND": true, "CDPATH": true, "GLOBIGNORE": true,
		"HOME": true, "PWD": true, "TMPDIR": true, "TMP": true, "TEMP": true, "USER": true, "LOGNAME": true,
		"PERL5OPT": true, "PERL5LIB": true, "PERLLIB": true, "RUBYOPT": true, "RUBYLIB": true,
		"JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true, "JDK_JAVA_OPTIONS": true, "CLASSPATH": true,
		"OPENSSL_CONF": true, "OPENSSL_ENGINES": true, "GCONV_PATH": true, "LOCPATH": true, "NLSPATH": true,
		"HOSTALIASES": true, "VIRTUAL_ENV": true, "GOFLAGS": true, "EDITOR": true, "VISUAL": true, "PAGER": true,
	}
	refusedEnvPrefixes = []string{
		"NPM_CONFIG_", "NPM_", "NPX_", "COREPACK_", "NODE_", "YARN_", "PNPM_", "BUN_", "DENO_",
		"PYTHON", "PIP_", "UV_", "CONDA_", "PIPX_", "POETRY_",
		"LD_", "DYLD_", "BASH_FUNC_", "XDG_", "GIT_", "GEM_", "BUNDLE_", "MALLOC_", "GLIBC_",
	}
)

// RefusedEnv reports whether a personal connection may never set the
// environment variable name.
func RefusedEnv(name string) bool {
	u := strings.ToUpper(strings.TrimSpace(name))
	if refusedEnvExact[u] {
		return true
	}
	for _, p := range refusedEnvPrefixes {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}
