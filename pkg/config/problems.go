package config

import (
	"errors"
	"fmt"
)

// Problem severities.
const (
	// SeverityError means the server (or the file) was rejected.
	SeverityError = "error"
	// SeverityWarning means it loaded with a part ignored or adjusted.
	SeverityWarning = "warning"
)

// HasErrors reports whether any problem has Severity "error".
func HasErrors(problems []Problem) bool {
	for _, p := range problems {
		if p.Severity == SeverityError {
			return true
		}
	}
	return false
}

// ErrorOf joins the problems with Severity "error" into one error, or
// returns nil when there are none. Warnings are left out.
func ErrorOf(problems []Problem) error {
	var errs []error
	for _, p := range problems {
		if p.Severity == SeverityError {
			errs = append(errs, errors.New(p.String()))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
}

// Problem is one configuration finding. Severity "error" means the server
// (or the file) was rejected; "warning" means it loaded with a part ignored.
type Problem struct {
	File     string `json:"file"`
	Server   string `json:"server,omitempty"`
	Field    string `json:"field,omitempty"`
	Message  string `json:"message"`
	Severity string `json:"severity"`
}

// String renders "file: server 'name': field: message", leaving out empty parts.
func (p Problem) String() string {
	s := p.File
	if p.Server != "" {
		s += ": server '" + p.Server + "'"
	}
	if p.Field != "" {
		s += ": " + p.Field
	}
	return s + ": " + p.Message
}
