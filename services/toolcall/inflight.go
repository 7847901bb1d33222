package toolcall

import (
	"fmt"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/inflight"
)

// Caps on calls in flight (limits.max_calls_in_flight_per_user and
// _per_server), counted on this replica: a user's calls past their cap,
// or any calls past an upstream's, are refused at once with rate_limited,
// so one user cannot take every descriptor and goroutine of the service
// nor starve the others.

// Limits named in rate_limited errors and the mcpbus_toolcall_rate_limited_total label.
const (
	limitUser   = "user"
	limitServer = "server"
)

// admitInFlight counts a call under key (a user or a server, as limit
// says) in l, to be given back with l.Release(key) once, or refuses it
// with rate_limited naming the limit and its setting.
func (s *Service) admitInFlight(l *inflight.Limiter, limit, key string) error {
	if l.TryAcquire(key) {
		return nil
	}
	s.metrics.RateLimited.WithLabelValues(limit).Inc()
	setting := "limits.max_calls_in_flight_per_" + limit
	return &bus.Error{Code: bus.CodeRateLimited,
		Message: fmt.Sprintf("too many tool calls in flight for %s '%s': %s is %d; retry when one has ended", limit, key, setting, l.Max()),
		Details: map[string]any{"limit": setting, "max": l.Max()}}
}
