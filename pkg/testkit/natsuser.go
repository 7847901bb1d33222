package testkit

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// NATSUser is a connection as one NATS user that records the permission
// violations the server reports to it, for tests of a permissions config.
type NATSUser struct {
	NC *nats.Conn

	mu         sync.Mutex
	violations []string
}

// ConnectNATSUser connects to url as user (closed when the test ends);
// inbox, when set, is its custom inbox prefix; extra are more nats.go
// options (TLS).
func ConnectNATSUser(t testing.TB, url, user, password, inbox string, extra ...nats.Option) *NATSUser {
	t.Helper()
	u := &NATSUser{}
	opts := []nats.Option{nats.UserInfo(user, password), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			u.mu.Lock()
			u.violations = append(u.violations, err.Error())
			u.mu.Unlock()
		}
	})}
	if inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	nc, err := nats.Connect(url, append(opts, extra...)...)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	u.NC = nc
	return u
}

// Refused waits until the server has reported a permission violation
// naming subject (what names the attempt in the failure).
func (u *NATSUser) Refused(t testing.TB, what, subject string) {
	t.Helper()
	Eventually(t, 10*time.Second, what+" to be refused by the server", func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return slices.ContainsFunc(u.violations, func(v string) bool { return strings.Contains(v, `"`+subject+`"`) })
	})
}
