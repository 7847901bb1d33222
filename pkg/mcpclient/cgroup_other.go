//go:build !linux

package mcpclient

import (
	"log/slog"
	"time"
)

// sessionCgroup exists on Linux only; here it is always nil.
type sessionCgroup struct{ fd int }

func newSessionCgroup(*slog.Logger) *sessionCgroup       { return nil }
func (*sessionCgroup) started()                          {}
func (*sessionCgroup) kill()                             {}
func (*sessionCgroup) killAndRemove(time.Duration) error { return nil }

// killTree is Linux only: elsewhere the process group kill is all there is.
func killTree(int) {}
