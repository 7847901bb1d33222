package store

import "context"

// Pinger is the part of a database a service checks at start (readiness);
// every Store is one.
type Pinger interface {
	Ping(ctx context.Context) error
}
