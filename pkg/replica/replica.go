// Package replica names the running process among the replicas of a
// deployment: one id per process, made once by the main (bootstrap) and
// handed to every service it runs, which use it as their lease owner
// (tokens, taskpoller) and presence id (toolcall).
package replica

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
)

// NewID returns "<host>-<pid>-<12 random hex digits>", where host is the
// hostname with every character outside letters, digits and '-' replaced
// by '-' (and "localhost" when unknown), so an id is one NATS subject token
// and a KV key token.
func NewID() string {
	host, _ := os.Hostname()
	return idFor(host, os.Getpid())
}

// PID returns the process id inside an id made by NewID (0 when id is not
// one), so an operator can tell which process holds a lease.
func PID(id string) int {
	parts := strings.Split(id, "-")
	if len(parts) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	return pid
}

func idFor(host string, pid int) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	host = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			return r
		}
		return '-'
	}, host)
	if host == "" {
		host = "localhost"
	}
	return host + "-" + strconv.Itoa(pid) + "-" + hex.EncodeToString(b[:])
}
