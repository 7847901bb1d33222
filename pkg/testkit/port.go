package testkit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePort returns a loopback TCP port that was free a moment ago, for a
// child process that must be told its port before it starts.
//
// The port is drawn below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), so the outgoing connections
// and port-0 listeners of every other process on the machine, which take
// their ports from that range, cannot take it between this call and the
// child's bind. Only another caller of FreePort could, and each draw is
// random among thousands of ports.
func FreePort() (int, error) {
	lo, hi := belowEphemeral()
	for range 64 {
		port := lo + rand.IntN(hi-lo)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		if err := ln.Close(); err != nil {
			return 0, fmt.Errorf("testkit: close probe listener: %w", err)
		}
		return port, nil
	}
	return 0, errors.New("testkit: no free loopback port below the ephemeral range after 64 tries")
}

// belowEphemeral is the range of ports FreePort draws from: from 10000
// up to the start of the ephemeral range (32768 when it cannot be read).
func belowEphemeral() (lo, hi int) {
	lo, hi = 10000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) == 2 {
		if start, err := strconv.Atoi(f[0]); err == nil && start > lo+1000 {
			hi = start
		}
	}
	return lo, hi
}
