// Package healthhttp serves a process's liveness and readiness over HTTP for
// orchestrators (Kubernetes probes, compose health checks): GET /healthz
// answers 200 while the process runs, GET /readyz answers 200 while every
// readiness check passes and 503, naming the failing checks, otherwise. It
// is what `mcpbus serve <service> --health-listen` runs beside a service
// that has no HTTP listener of its own.
package healthhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"time"
)

// Check reports whether one dependency is ready; a non-nil error makes
// /readyz answer 503. The error's text is not sent (it may name hosts);
// the response names the check only.
type Check func(ctx context.Context) error

// Checks are named readiness checks.
type Checks map[string]Check

// checkTimeout bounds one /readyz request's checks.
const checkTimeout = 2 * time.Second

// Handler serves /healthz and /readyz.
func Handler(checks Checks) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
		defer cancel()
		names := make([]string, 0, len(checks))
		for name := range checks {
			names = append(names, name)
		}
		sort.Strings(names)
		results := make(map[string]string, len(checks))
		status, state := http.StatusOK, "ready"
		for _, name := range names {
			results[name] = "ok"
			if err := checks[name](ctx); err != nil {
				results[name], status, state = "unavailable", http.StatusServiceUnavailable, "not_ready"
			}
		}
		writeJSON(w, status, map[string]any{"status": state, "checks": results})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// Server is a running health listener.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Start listens on addr (host:port; port 0 picks a free one) and serves
// Handler(checks) until Close.
func Start(addr string, checks Checks, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health listener on %s: %w", addr, err)
	}
	s := &Server{
		srv:  &http.Server{Handler: Handler(checks), ReadHeaderTimeout: 5 * time.Second},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	if log != nil {
		log.Info("health listener started", "addr", ln.Addr().String())
	}
	return s, nil
}

// Addr is the address the listener is bound to.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the listener, waiting up to ctx for open requests, and
// returns once the serving goroutine has exited.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	return errors.Join(err, <-s.done)
}
