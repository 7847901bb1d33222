package config

// ValidateFiles loads both files and returns every problem: file-level
// errors (missing explicit file, bad JSON/YAML, unknown keys) as Problems,
// per-server problems, settings validation, and the cross-file checks of
// CrossCheck. Enabled stdio servers whose cwd is missing on this host get a
// warning (services may run on other hosts). Used by `mcpbus config
// validate`, which fails when HasErrors.
func ValidateFiles(extPath string, extExplicit bool, settingsPath string, settingsExplicit bool, env Env) []Problem {
	var out []Problem
	ext, err := LoadExtensions(extPath, extExplicit, env)
	if err != nil {
		out = append(out, Problem{File: extPath, Message: err.Error(), Severity: SeverityError})
	} else {
		out = append(out, ext.Problems...)
		for _, s := range ext.Enabled() {
			if s.Type != TransportStdio {
				continue
			}
			if err := s.ValidateCwd(); err != nil {
				out = append(out, Problem{File: ext.Path, Server: s.Name, Field: "cwd", Message: err.Error(), Severity: SeverityWarning})
			}
		}
	}
	settings, err := readSettings(settingsPath, settingsExplicit, env)
	if err != nil {
		out = append(out, Problem{File: settingsPath, Message: err.Error(), Severity: SeverityError})
	} else {
		out = append(out, settings.Validate()...)
	}
	if ext != nil && settings != nil {
		out = append(out, CrossCheck(ext, settings)...)
	}
	return out
}

// CrossCheck returns the startup rules that need both files, for enabled
// servers: task_toolsets need mcp_tasks.enabled and a sqlite or postgres
// database; with deployment.multi_instance a refresh_token OAuth server
// needs a shared credentials key ($MCPBUS_CREDENTIALS_KEY or
// $DEER_FLOW_CREDENTIALS_KEY).
func CrossCheck(ext *Extensions, s *Settings) []Problem {
	var out []Problem
	add := func(srv *Server, field, msg string) {
		out = append(out, Problem{File: ext.Path, Server: srv.Name, Field: field, Message: msg, Severity: SeverityError})
	}
	for _, srv := range ext.Enabled() {
		if srv.TaskEnabled() {
			if !s.MCPTasks.Enabled {
				add(srv, "task_toolsets", "task toolsets need mcp_tasks.enabled: true in "+settingsLabel(s))
			}
			if s.Database.Backend == BackendMemory {
				add(srv, "task_toolsets", "task toolsets need database.backend sqlite or postgres in "+settingsLabel(s))
			}
		}
		if s.Deployment.MultiInstance && srv.OAuthEnabled() && srv.OAuth.GrantType == GrantRefreshToken && !s.CredentialsKeySet {
			add(srv, "oauth.grant_type", "a multi-instance deployment with refresh_token OAuth needs "+EnvCredentialsKey+" (or "+EnvDeerFlowCredentialsKey+") set on every instance")
		}
	}
	return out
}
