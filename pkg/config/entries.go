package config

// ExpandString applies the loader's whole-string "$VAR" expansion to s in
// this process's environment.
func ExpandString(s string) string { return expandString(s) }
