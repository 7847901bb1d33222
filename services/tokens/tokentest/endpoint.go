// Package tokentest is an OAuth token endpoint for tests, over real HTTP:
// it serves client_credentials and refresh_token, rotates the refresh token
// on every use, answers a spent or unknown refresh token with invalid_grant,
// can hold requests until the test releases them or fail them on demand, and
// counts what it saw. It refuses HTTP Basic client authentication, so a test
// also proves that credentials travel in the form body.
package tokentest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Options configure an Endpoint. Empty fields take the defaults named.
type Options struct {
	ClientID     string // default "client-id"
	ClientSecret string // default a random secret
	// BasicAuth: the client authenticates with client_secret_basic (an
	// Authorization header); client credentials in the form are refused.
	// Default client_secret_post.
	BasicAuth    bool
	RefreshToken string // the seed; default a random token
	ExpiresIn    int    // default 3600; negative leaves the field out
	TokenField   string // default access_token
	TypeField    string // default token_type
	ExpiresField string // default expires_in
	TokenType    string // default Bearer; "-" leaves the field out
}

// Endpoint is a running token endpoint.
type Endpoint struct {
	URL  string
	opts Options

	mu        sync.Mutex
	current   string // the valid refresh token
	seq       int
	calls     int
	refreshes int // successful refresh_token grants
	ccGrants  int // successful client_credentials grants
	invalid   int // invalid_grant answers
	forms     []url.Values
	issued    []string
	gate      *Gate
	failures  []failure
}

type failure struct {
	status int
	body   string
}

// Gate holds requests: each request that arrives while the gate is set
// sends its form on Arrived, then waits for Release (or for its client to
// go away, in which case nothing is issued and nothing rotates).
type Gate struct {
	Arrived  chan url.Values
	released chan struct{}
	once     sync.Once
}

// Release lets every held and later request through.
func (g *Gate) Release() { g.once.Do(func() { close(g.released) }) }

// New starts an endpoint for the test and stops it at cleanup.
func New(t testing.TB, o Options) *Endpoint {
	t.Helper()
	if o.ClientID == "" {
		o.ClientID = "client-id"
	}
	if o.ClientSecret == "" {
		o.ClientSecret = "cs-" + random()
	}
	if o.RefreshToken == "" {
		o.RefreshToken = "seed-rt-" + random()
	}
	if o.ExpiresIn == 0 {
		o.ExpiresIn = 3600
	}
	if o.TokenField == "" {
		o.TokenField = "access_token"
	}
	if o.TypeField == "" {
		o.TypeField = "token_type"
	}
	if o.ExpiresField == "" {
		o.ExpiresField = "expires_in"
	}
	if o.TokenType == "" {
		o.TokenType = "Bearer"
	}
	e := &Endpoint{opts: o, current: o.RefreshToken}
	srv := httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(func() {
		e.mu.Lock()
		if e.gate != nil {
			e.gate.Release()
		}
		e.mu.Unlock()
		srv.Close()
	})
	e.URL = srv.URL + "/oauth/token"
	return e
}

func random() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Options returns the effective options (secrets included, for configs).
func (e *Endpoint) Options() Options { return e.opts }

// Hold installs a gate for the requests that arrive from now on.
func (e *Endpoint) Hold() *Gate {
	g := &Gate{Arrived: make(chan url.Values, 1024), released: make(chan struct{})}
	e.mu.Lock()
	e.gate = g
	e.mu.Unlock()
	return g
}

// Unhold removes the gate for later requests (held ones stay held until
// Release).
func (e *Endpoint) Unhold() {
	e.mu.Lock()
	e.gate = nil
	e.mu.Unlock()
}

// FailNext makes the next request answer status with body.
func (e *Endpoint) FailNext(status int, body string) {
	e.mu.Lock()
	e.failures = append(e.failures, failure{status, body})
	e.mu.Unlock()
}

// SetRefreshToken starts a new chain from rt (an operator issued a new one).
func (e *Endpoint) SetRefreshToken(rt string) {
	e.mu.Lock()
	e.issued = append(e.issued, rt)
	e.current = rt
	e.mu.Unlock()
}

// SetClientSecret changes the accepted client secret (a rotated secret).
func (e *Endpoint) SetClientSecret(sec string) {
	e.mu.Lock()
	e.issued = append(e.issued, e.opts.ClientSecret)
	e.opts.ClientSecret = sec
	e.mu.Unlock()
}

// SetExpiresIn changes the lifetime of tokens issued from now on.
func (e *Endpoint) SetExpiresIn(n int) {
	e.mu.Lock()
	e.opts.ExpiresIn = n
	e.mu.Unlock()
}

// Counts are what the endpoint saw.
type Counts struct {
	Calls, Refreshes, ClientCredentials, InvalidGrants int
}

// Counts returns the counters.
func (e *Endpoint) Counts() Counts {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Counts{e.calls, e.refreshes, e.ccGrants, e.invalid}
}

// CurrentRefreshToken is the refresh token the endpoint accepts now.
func (e *Endpoint) CurrentRefreshToken() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.current
}

// Forms returns every request's form, in arrival order.
func (e *Endpoint) Forms() []url.Values {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]url.Values(nil), e.forms...)
}

// Secrets returns every secret the endpoint knows: the client secret, the
// seed, and every access and refresh token it issued.
func (e *Endpoint) Secrets() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string{e.opts.ClientSecret, e.opts.RefreshToken}, e.issued...)
}

func (e *Endpoint) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request"})
		return
	}
	e.mu.Lock()
	e.calls++
	e.forms = append(e.forms, r.PostForm)
	g := e.gate
	var fail *failure
	if len(e.failures) > 0 {
		fail = &e.failures[0]
		e.failures = e.failures[1:]
	}
	e.mu.Unlock()
	if g != nil {
		g.Arrived <- r.PostForm
		select {
		case <-g.released:
		case <-r.Context().Done():
			return // the client went away: nothing issued, nothing rotated
		}
	}
	if fail != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(fail.status)
		_, _ = w.Write([]byte(fail.body))
		return
	}
	f := r.PostForm
	id, secret, basic := r.BasicAuth()
	if basic != e.opts.BasicAuth {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request", "error_description": "use the client authentication method registered"})
		return
	}
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		if f.Has("client_secret") {
			id = "" // one method only
		}
	} else {
		id, secret = f.Get("client_id"), f.Get("client_secret")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.Context().Err() != nil {
		return
	}
	if id != e.opts.ClientID || secret != e.opts.ClientSecret {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client", "error_description": "bad client credentials"})
		return
	}
	resp := map[string]any{}
	switch f.Get("grant_type") {
	case "client_credentials":
		e.ccGrants++
	case "refresh_token":
		if f.Get("refresh_token") == "" || f.Get("refresh_token") != e.current {
			e.invalid++
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant", "error_description": "refresh token is invalid, expired or revoked"})
			return
		}
		e.refreshes++
		e.seq++
		e.current = "rt-" + itoa(e.seq) + "-" + random()
		e.issued = append(e.issued, e.current)
		resp["refresh_token"] = e.current
	default:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
		return
	}
	e.seq++
	at := "at-" + itoa(e.seq) + "-" + random()
	e.issued = append(e.issued, at)
	resp[e.opts.TokenField] = at
	if e.opts.TokenType != "-" {
		resp[e.opts.TypeField] = e.opts.TokenType
	}
	if e.opts.ExpiresIn >= 0 {
		resp[e.opts.ExpiresField] = e.opts.ExpiresIn
	}
	writeJSON(w, http.StatusOK, resp)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
