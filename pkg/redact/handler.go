package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Logger returns a logger that writes through l's handler with every
// message and attribute passed through r (see [Handler]). r may be nil: the
// URL rule still applies.
func Logger(l *slog.Logger, r *Redactor) *slog.Logger {
	return slog.New(Handler(l.Handler(), r))
}

// Handler wraps h so the message, every string attribute, every error
// attribute and every fmt.Stringer attribute (groups included) goes through
// r.String before h sees it. Use it for loggers that receive text the
// gateway does not write itself: transport libraries and upstream servers.
func Handler(h slog.Handler, r *Redactor) slog.Handler {
	return &handler{next: h, r: r}
}

type handler struct {
	next slog.Handler
	r    *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = h.attr(a)
	}
	return &handler{next: h.next.WithAttrs(clean), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), r: h.r}
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]slog.Attr, len(g))
		for i, ga := range g {
			clean[i] = h.attr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.String(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, h.r.String(x.String()))
		case []byte:
			return slog.String(a.Key, h.r.String(string(x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
