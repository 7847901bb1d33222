package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// cmdAudit is `mcpbus audit tail [--user U] [--tool T] [--kind K]
// [--limit N] [--since D] [--follow] [--json]`: the newest audit records,
// oldest first, then (with --follow) every new one as it is written.
func cmdAudit(args []string, env config.Env) error {
	if len(args) == 0 || args[0] != "tail" {
		return errors.New("usage: mcpbus audit tail [--user U] [--tool T] [--kind call|config] [--limit N] [--since 1h] [--follow] [--json]")
	}
	fs := flag.NewFlagSet("audit tail", flag.ContinueOnError)
	var f clientFlags
	f.register(fs, env) // --user filters the records here
	tool := fs.String("tool", "", "only calls of this tool")
	kind := fs.String("kind", "", "only records of this kind: "+audit.KindsText)
	limit := fs.Int("limit", 20, fmt.Sprintf("how many of the newest records to print first (at most %d)", audit.MaxLimit))
	since := fs.Duration("since", 0, "only records of the last duration (e.g. 1h; default the whole stream)")
	follow := fs.Bool("follow", false, "keep printing new records until interrupted")
	if _, err := parseArgs(fs, args[1:]); err != nil {
		return err
	}
	if !audit.KnownKind(*kind) {
		return errors.New("--kind must be " + audit.KindsText)
	}
	nc, names, err := f.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	flt := audit.Filter{User: f.user, Tool: *tool, Kind: *kind, Limit: *limit}
	if *since > 0 {
		flt.Since = time.Now().Add(-*since)
	}
	emit := func(r audit.Record) error {
		if f.jsonOnly {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			_, err = fmt.Println(string(b))
			return err
		}
		_, err := fmt.Println(formatRecord(r))
		return err
	}
	if !*follow {
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
		defer cancel()
		recs, err := audit.Read(ctx, js, names, flt)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := audit.Follow(ctx, js, names, flt, emit); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// formatRecord is one record on one line.
func formatRecord(r audit.Record) string {
	ts := r.Time.UTC().Format(time.RFC3339Nano)
	if r.Kind == audit.KindConfig {
		var ch []string
		for _, c := range r.Changes {
			s := c.Op + " " + c.Server
			if c.Server == "" {
				s = c.Op
			}
			if len(c.Keys) > 0 {
				s += " (" + strings.Join(c.Keys, ", ") + ")"
			}
			ch = append(ch, s)
		}
		return fmt.Sprintf("%s config user=%s action=%s changes=[%s]", ts, r.User, r.Action, strings.Join(ch, "; "))
	}
	if r.Kind == audit.KindReplyDropped {
		return fmt.Sprintf("%s reply_dropped user=%s service=%s subject=%s reply=%s", ts, r.User, r.Service, r.Subject, r.Reply)
	}
	line := fmt.Sprintf("%s call user=%s thread=%s tool=%s server=%s transport=%s outcome=%s duration_ms=%.1f result_bytes=%d",
		ts, r.User, r.Thread, r.Tool, r.Server, r.Transport, r.Outcome, r.DurationMS, r.ResultBytes)
	if r.RequestID != "" {
		line += " request_id=" + r.RequestID
	}
	if r.TraceID != "" {
		line += " trace_id=" + r.TraceID
	}
	if len(r.Arguments) > 0 {
		line += " arguments=" + string(r.Arguments)
	}
	return line
}
