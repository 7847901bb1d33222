//go:build !linux

package mcpclient

import "errors"

// TrackChildren needs Linux's /proc start times: elsewhere the children's
// parent-death handling is all there is.
func TrackChildren(string) (int, error) { return 0, errors.ErrUnsupported }

func recordChild(int, *sessionCgroup) {}

func forgetChild(int) {}
