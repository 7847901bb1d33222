package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
)

// resetMessage is the seed's cache-reset reply text.
const resetMessage = "MCP tools cache reset. Tools will reload on next use."

// catalog returns the catalog of the current shared state for user: the
// deployment catalog, plus that user's personal connections when user is
// not empty.
func (s *Service) catalog(ctx context.Context, user string) (*catalog, error) {
	snap := s.watcher.Current()
	if user == "" {
		return s.cache.get(ctx, snap)
	}
	return s.cache.userCatalog(ctx, snap, user)
}

// published returns the catalog already built for user and the current
// state, or nil.
func (s *Service) published(user string) *catalog {
	snap := s.watcher.Current()
	if user == "" {
		return s.cache.published(snap)
	}
	return s.cache.publishedFor(snap, user)
}

// fast answers a plain request (no promotion state, no user message) on l
// from the catalog published for the current state (and the request's
// user), right on the endpoint's goroutine: a whole catalog with its
// reply encoded once, a page encoded now. Everything else goes to slow.
func (s *Service) fast(slow micro.Handler, l listing) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		var req bus.ToolsListRequest
		if data := r.Data(); (len(data) == 0 || json.Unmarshal(data, &req) == nil && plain(req)) && !s.virtualRequest(r, req) {
			if cat := s.published(req.UserID); cat != nil {
				ctx, span := bus.StartSpan(context.Background(), r)
				body, err := cat.encoded(l, req, s.maxPayload())
				bus.EndSpan(span, err)
				if err != nil {
					bus.RespondContext(ctx, r, s.log, bus.ToolsListReply{}, err)
					return
				}
				if err := r.Respond(body); err != nil {
					s.log.Warn("cannot send reply", "subject", r.Subject(), observability.Err(err))
				}
				return
			}
		}
		slow.Handle(r)
	})
}

// maxPayload is the most one message on the bus may hold: what the
// server announced, NATS' default 1 MiB while it is not known (not
// connected yet).
func (s *Service) maxPayload() int {
	if n := s.deps.NC.MaxPayload(); n > 0 {
		return int(n)
	}
	return 1 << 20
}

// handleList answers mcpbus.tools.list: the caller's catalog, whole or a
// page.
func (s *Service) handleList(ctx context.Context, req bus.ToolsListRequest) (bus.ToolsListReply, error) {
	return s.answer(ctx, agentListing, req)
}

// handleCatalog answers toolcall's mcpbus.internal.catalog: the whole
// catalog (or a page), and with a user_id that user's personal tools too
// (Server is the runtime name).
func (s *Service) handleCatalog(ctx context.Context, req bus.ToolsListRequest) (bus.ToolsListReply, error) {
	return s.answer(ctx, fullListing, req)
}

func (s *Service) answer(ctx context.Context, l listing, req bus.ToolsListRequest) (bus.ToolsListReply, error) {
	cat, err := s.catalog(ctx, req.UserID)
	if err != nil {
		return bus.ToolsListReply{}, err
	}
	if l == agentListing {
		if cat, err = s.forSet(ctx, cat, req.VirtualServer); err != nil {
			return bus.ToolsListReply{}, err
		}
	}
	return cat.answer(l, req, s.maxPayload())
}

// virtualRequest reports a request the fast path must leave to the slow
// one: it names a virtual server, or came on the per-user subject of a
// NATS identity bound to virtual servers (the policy check).
func (s *Service) virtualRequest(r micro.Request, req bus.ToolsListRequest) bool {
	if req.VirtualServer != "" {
		return true
	}
	if s.virtual.Registry().Len() == 0 {
		return false
	}
	user, bound := s.deps.Names.UserOf(r.Subject())
	return bound && s.virtual.Registry().IdentitySets(user) != nil
}

func (s *Service) handleSearch(ctx context.Context, req bus.ToolsSearchRequest) (bus.ToolsSearchReply, error) {
	if req.Query == "" {
		return bus.ToolsSearchReply{}, bus.Errorf(bus.CodeInvalidRequest, "query is required")
	}
	cat, err := s.catalog(ctx, req.UserID)
	if err != nil {
		return bus.ToolsSearchReply{}, err
	}
	if cat, err = s.forSet(ctx, cat, req.VirtualServer); err != nil {
		return bus.ToolsSearchReply{}, err
	}
	return cat.search(req), nil
}

// handleServers reports per-server status, after a lookup (which discovers
// what is missing) unless the request says not to. A failed lookup is not
// an error here: the statuses say why.
func (s *Service) handleServers(ctx context.Context, req bus.ServersRequest) (bus.ServersReply, error) {
	snap := s.watcher.Current()
	if !req.NoRefresh {
		_, _ = s.cache.get(ctx, snap)
	}
	return s.cache.status(snap.Extensions), nil
}

// resetRetryAfter is the retry hint of a reset refused because the KV
// bucket cannot be written (a JetStream leader election takes seconds).
const resetRetryAfter = 2

// resetWriteTimeout bounds the compare-and-set of a reset, retries
// included: long enough for the config bucket's copies to elect a new
// leader when the one that led is lost (bus.BumpGeneration tries again).
const resetWriteTimeout = 15 * time.Second

// within is ctx bounded by d and by three quarters of the time ctx has
// left, so whatever runs under it leaves the handler time to answer before
// the requester gives up.
func within(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(deadline)*3/4)
	}
	return context.WithTimeout(ctx, d)
}

// handleReset raises the shared generation with a compare-and-set on the
// KV key's revision, so generations never repeat or go backwards; every
// replica makes its cache stale when it sees it (refresh.go). It answers
// only once the generation is durably written, with how many replicas of
// each service acknowledged it within Config.AckWait. When the bucket
// cannot be written (no JetStream leader, say) nothing is reset anywhere
// and the answer is unavailable with a retry hint.
func (s *Service) handleReset(ctx context.Context, req bus.CacheResetRequest) (bus.CacheResetReply, error) {
	wctx, cancel := within(ctx, resetWriteTimeout)
	gen, err := bus.BumpGeneration(wctx, s.deps.KV)
	cancel()
	if err != nil {
		s.log.Warn("cache reset refused: the cache generation cannot be written to the KV bucket", observability.Err(err))
		e := bus.Wrap(bus.CodeUnavailable, err, fmt.Sprintf("the cache was not reset: the shared state in NATS JetStream cannot be written right now (no replica was reset); retry in %d seconds", resetRetryAfter))
		e.Details = map[string]any{"retry_after_seconds": resetRetryAfter}
		return bus.CacheResetReply{}, e
	}
	s.log.Info("cache reset requested", observability.KeyGen, gen, "reason", req.Reason)
	return bus.CacheResetReply{Success: true, Message: resetMessage, Scope: "shared_config", Generation: gen, Acknowledged: s.awaitAcks(ctx, gen)}, nil
}

// awaitAcks counts the replicas that acknowledged gen, waiting for the
// others at most Config.AckWait (and never past ctx).
func (s *Service) awaitAcks(ctx context.Context, gen int64) map[string]bus.ReplicaAcks {
	if s.deps.PresenceKV == nil {
		return map[string]bus.ReplicaAcks{}
	}
	ctx, cancel := within(ctx, s.cfg.AckWait)
	defer cancel()
	acks, err := sharedstate.AwaitAcks(ctx, s.deps.JS, s.deps.PresenceKV, gen)
	if err != nil {
		s.log.Warn("cannot read the acknowledgements of the cache generation", observability.KeyGen, gen, observability.Err(err))
	}
	if acks == nil {
		acks = map[string]bus.ReplicaAcks{}
	}
	return acks
}

// publishCatalogEvent announces a published catalog on
// mcpbus.events.catalog in the background; server names the server whose
// background rediscovery it follows ("" for any other publication). The
// message id makes JetStream drop the copies every other replica publishes
// for the same catalog (and server).
func (s *Service) publishCatalogEvent(cat *catalog, server string) {
	suffix := ""
	if server != "" {
		suffix = ":ready:" + server
	}
	s.publishEvent(bus.CatalogEvent{Generation: cat.gen, CatalogHash: cat.hash, Revision: cat.revision, Server: server}, suffix)
}

// publishEvent publishes ev in the background with the message id of its
// catalog (revision, generation) followed by suffix.
func (s *Service) publishEvent(ev bus.CatalogEvent, suffix string) {
	s.events.Add(1)
	go func() {
		defer s.events.Done()
		body, _ := json.Marshal(ev)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		id := "catalog:" + ev.Revision + ":" + strconv.FormatInt(ev.Generation, 10) + suffix
		if _, err := s.deps.JS.Publish(ctx, s.deps.Names.EventsCatalog(), body, jetstream.WithMsgID(id)); err != nil {
			s.log.Warn("cannot publish catalog event", observability.Err(err))
		}
	}()
}
