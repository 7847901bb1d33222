//go:build !linux

package mcpclient

import "errors"

func isolatedCommand(_ *Credential, command string, args []string) (string, []string) {
	return command, args
}

// IsolationUnavailable says [Spec.Isolate] needs Linux.
func IsolationUnavailable() error {
	return errors.New("isolated stdio children need Linux PID and mount namespaces")
}
