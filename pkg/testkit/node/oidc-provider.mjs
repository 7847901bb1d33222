// A real OAuth 2.1 authorization server for tests: oidc-provider (npm)
// with PKCE required, dynamic client registration, resource indicators
// (JWT access tokens for the resource), refresh-token rotation, revocation
// and a short access-token lifetime. Its development interactions (a login
// form that takes any login, and a consent form) play the person.
//
// Environment: PORT, AT_TTL (access-token seconds, default 60).
// Test routes (not OAuth): GET /test/stats (token endpoint calls by grant
// type, registrations, revocations), POST /test/kill-refresh?account=ID
// (forget the account's refresh tokens, so the next refresh is
// invalid_grant).
import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const ttl = Number(process.env.AT_TTL || 60);
const stats = { authorization_code: 0, refresh_token: 0, refresh_token_failed: 0, registration: 0, revocation: 0 };

const store = new Map();
class MemoryAdapter {
  constructor(name) { this.name = name; }
  key(id) { return `${this.name}:${id}`; }
  async upsert(id, payload) { store.set(this.key(id), { ...payload }); }
  async find(id) { return store.get(this.key(id)); }
  async findByUserCode() { return undefined; }
  async findByUid(uid) {
    for (const [k, v] of store) if (k.startsWith(`${this.name}:`) && v.uid === uid) return v;
    return undefined;
  }
  async consume(id) { const v = store.get(this.key(id)); if (v) v.consumed = Math.floor(Date.now() / 1000); }
  async destroy(id) { store.delete(this.key(id)); }
  async revokeByGrantId(grantId) { for (const [k, v] of store) if (v.grantId === grantId) store.delete(k); }
}

const provider = new Provider(issuer, {
  adapter: MemoryAdapter,
  findAccount: async (ctx, id) => ({ accountId: id, async claims() { return { sub: id }; } }),
  // mcp:admin is known but never granted for the resource (its scope
  // below): a server that needs it keeps answering 403.
  scopes: ['openid', 'offline_access', 'mcp:read', 'mcp:write', 'mcp:admin'],
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope: 'mcp:read mcp:write', audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'jwt',
      }),
    },
  },
  pkce: { required: () => true },
  rotateRefreshToken: true,
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' },
  ttl: { AccessToken: ttl, RefreshToken: 3600, Grant: 3600, Session: 3600, Interaction: 600, AuthorizationCode: 60 },
});

provider.on('grant.success', (ctx) => {
  const gt = ctx.oidc.params && ctx.oidc.params.grant_type;
  if (gt in stats) stats[gt] += 1;
});
provider.on('grant.error', (ctx) => {
  if (ctx.oidc.params && ctx.oidc.params.grant_type === 'refresh_token') stats.refresh_token_failed += 1;
});
provider.on('registration_create.success', () => { stats.registration += 1; });

provider.use(async (ctx, next) => {
  if (ctx.path === '/test/stats') { ctx.body = stats; return; }
  if (ctx.path === '/test/kill-refresh' && ctx.method === 'POST') {
    const account = ctx.query.account;
    let n = 0;
    for (const [k, v] of store) if (k.startsWith('RefreshToken:') && v.accountId === account) { store.delete(k); n += 1; }
    ctx.body = { killed: n };
    return;
  }
  await next();
  if (ctx.path === '/token/revocation' && ctx.status === 200) stats.revocation += 1;
});

provider.listen(port, '127.0.0.1', () => { console.log(`oidc-provider listening on ${issuer}`); });
