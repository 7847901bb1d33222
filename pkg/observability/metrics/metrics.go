// Package metrics defines every Prometheus metric of the mcpbus services in
// one place: one constructor per service (NewToolcall, NewDiscovery,
// NewTokens, NewTaskpoller, NewAPI, NewAudit) plus the families every
// service shares (NATS reconnects, cache generation). Each constructor
// registers on the registry it is given, so a process (or a test) chooses
// the registry: a `serve` process has its own, `mcpbus dev` shares one
// between its five services, and a test uses a fresh one.
//
// Registration is idempotent: constructing the same service's metrics twice
// on one registry returns collectors backed by the first registration, so
// two replicas in one test process may share a registry.
//
// Label sets are bounded: tool and server names come from the operator's
// configuration; a personal connection (one runtime name per user and
// definition) is always labelled server="personal" and tool="personal"
// (see Server, ToolLabel); no user, thread, task or request id is ever a
// label value.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Personal is the server and tool label of every personal connection.
const Personal = "personal"

// Server is the label value of a server name: personal connections collapse
// to "personal" (their runtime names are per user).
func Server(name string, personal bool) string {
	if personal {
		return Personal
	}
	return name
}

// ToolLabel is the label value of a tool of server name: a personal
// connection's tools collapse to "personal" too.
func ToolLabel(tool string, personal bool) string {
	if personal {
		return Personal
	}
	return tool
}

// NewRegistry returns a registry with the Go runtime and process
// collectors and RepliesDropped, the base of every process's /metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), RepliesDropped)
	return reg
}

// RepliesDropped counts requests a service dropped because their reply
// subject was not one their caller may receive on
// (mcpbus_bus_replies_dropped_total{service}; pkg/microsvc counts them).
// It is the process's, on every registry NewRegistry makes: the guard
// runs below any one service's metrics.
var RepliesDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "mcpbus_bus_replies_dropped_total",
	Help: "Requests dropped unanswered because their reply subject was not an inbox their caller may receive on, by service.",
}, []string{"service"})

// register registers c on reg, or returns the collector already registered
// under the same descriptors (a second service of the same kind on one
// registry). Any other registration error is a programming error.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// orNew is reg, or a throwaway registry when reg is nil (a service built
// without metrics still counts, into nothing anyone reads).
func orNew(reg prometheus.Registerer) prometheus.Registerer {
	if reg == nil {
		return prometheus.NewRegistry()
	}
	return reg
}

// durationBuckets are the latency buckets of calls and discoveries: 1 ms to
// about 2 minutes.
var durationBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 14)

// lagBuckets are the buckets of the task poll lag: 10 ms to about 20 min.
var lagBuckets = prometheus.ExponentialBuckets(0.01, 2.5, 16)
