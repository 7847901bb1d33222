// The console's browser suite: Playwright's core driving Debian's Chromium
// against a real `mcpbus dev` (started by TestConsoleInBrowser, which
// passes its address and keys in the environment). Each step prints
// "ok <step>"; the first failure prints "FAIL <step>: <why>" and exits 1.
// axe-core runs over every page: no serious or critical violation.
import { chromium } from 'playwright-core';
import { createServer } from 'node:http';
import { readFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const env = (k) => { const v = process.env[k]; if (!v) throw new Error(`${k} is not set`); return v; };
// CONSOLE_SUITE: admin-and-user (the default: every page, both roles) or
// catalog-10000 (the catalog page over 10,000 tools).
const SUITE = process.env.CONSOLE_SUITE || 'admin-and-user';
const full = SUITE === 'admin-and-user';
const BASE = env('CONSOLE_BASE');
const ADMIN_KEY = env('CONSOLE_ADMIN_KEY');
const ALICE_KEY = full ? env('CONSOLE_ALICE_KEY') : '';
const DEMO_BIN = full ? env('CONSOLE_DEMO_BIN') : '';
const ISSUER = full ? env('CONSOLE_ISSUER') : '';
const SHOTS = process.env.CONSOLE_SCREENSHOTS || '';
const WAIT = 60_000; // the longest any one condition is waited for (2 shared cores)

let step = 'start';
let aliceTask = ''; // alice's task, submitted while the admin's Tasks page is open
function check(cond, why) { if (!cond) throw new Error(why); }
function ok(name) { console.log(`ok ${name}`); }

async function axe(page, name) {
  await page.evaluate(axeSource); // CDP evaluation: not subject to the page's CSP
  const res = await page.evaluate(async () => window.axe.run(document, { resultTypes: ['violations'] }));
  const bad = res.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  check(bad.length === 0, `axe on ${name}: ${bad.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`).join('; ')}`);
  ok(`axe ${name}`);
}

async function shot(page, file) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}/${file}`, fullPage: false });
}

const heading = (page, name) => page.getByRole('heading', { level: 1, name, exact: true });

async function open(page, linkName) {
  await page.getByRole('navigation', { name: 'Console pages' }).getByRole('link', { name: linkName, exact: true }).click();
  await heading(page, linkName).waitFor({ timeout: WAIT });
}

async function signIn(page, key) {
  await page.goto(`${BASE}/ui/`);
  await heading(page, 'Sign in').waitFor({ timeout: WAIT });
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await heading(page, 'Overview').waitFor({ timeout: WAIT });
}

// retry re-runs act until probe holds (a condition on the server's state,
// such as a background discovery, seen through the page).
async function retry(act, probe, what) {
  for (let i = 0; i < 60; i++) {
    await act();
    if (await probe()) return;
  }
  throw new Error(`${what} did not happen`);
}

async function selectTool(page, name) {
  const search = page.getByLabel('Search tools');
  await retry(async () => { await search.fill(''); await search.fill(name); },
    async () => page.getByRole('button', { name, exact: true }).waitFor({ timeout: 2000 }).then(() => true, () => false), `tool ${name} to be listed`);
  await page.getByRole('button', { name, exact: true }).click();
  await page.getByRole('heading', { level: 2, name, exact: true }).waitFor({ timeout: WAIT });
}

// searchIn searches the catalog's kind (Tools, Resources, Prompts) for
// text and waits for the answer.
async function searchIn(page, kind, text) {
  await page.getByLabel('Search in').selectOption({ label: kind });
  const search = page.getByLabel(`Search ${kind.toLowerCase()}`);
  await search.fill(text);
  await page.getByRole('region', { name: kind }).getByText(/ match(es)?; showing /).waitFor({ timeout: WAIT });
}

// statusTexts records every text the playground's status line shows.
async function recordStatus(page) {
  await page.evaluate(() => {
    window.__status = [];
    const el = document.querySelector('.progress [role=status]');
    new MutationObserver((recs) => recs.forEach((r) => r.addedNodes.forEach((n) => window.__status.push(n.textContent))))
      .observe(el, { childList: true, characterData: true, subtree: true });
  });
}

async function admin(browser) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await ctx.newPage();
  const cspViolations = [];
  page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text()); });

  step = 'sign-in page';
  await page.goto(`${BASE}/ui/`);
  await heading(page, 'Sign in').waitFor({ timeout: WAIT });
  await axe(page, 'Sign in');
  await page.getByLabel('API key').fill('not-a-key');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').filter({ hasText: 'not valid' }).waitFor({ timeout: WAIT });
  step = 'sign in as admin';
  await signIn(page, ADMIN_KEY);
  const cookies = await ctx.cookies();
  const c = cookies.find((x) => x.name === 'mcpbus_console');
  check(c && c.httpOnly && c.sameSite === 'Strict' && c.expires > 0, `session cookie ${JSON.stringify(c)}`);
  check(!(await page.evaluate(() => document.cookie)).includes('mcpbus_console'), 'the page script can read the session cookie');
  ok(step);

  step = 'overview';
  await page.getByText('Catalog generation').waitFor({ timeout: WAIT });
  await page.getByText(/^Last 10 minutes: \d+ calls, \d+ failed \(every user's calls through every replica\)\.$/).waitFor({ timeout: WAIT });
  await axe(page, 'Overview');
  ok(step);

  step = 'keyboard navigation';
  await page.goto(`${BASE}/ui/`);
  await heading(page, 'Overview').waitFor({ timeout: WAIT });
  await page.keyboard.press('Tab');
  check(await page.evaluate(() => document.activeElement.textContent) === 'Skip to content', 'the first Tab stop is not the skip link');
  let reached = false;
  for (let i = 0; i < 12 && !reached; i++) {
    await page.keyboard.press('Tab');
    reached = await page.evaluate(() => document.activeElement.textContent === 'Tasks');
  }
  check(reached, 'the Tasks link is not reachable with Tab');
  await page.keyboard.press('Enter');
  await heading(page, 'Tasks').waitFor({ timeout: WAIT });
  ok(step);

  step = 'servers: add a server and see its tools';
  await open(page, 'Servers');
  await page.getByRole('cell', { name: 'demo', exact: true }).waitFor({ timeout: WAIT });
  // demo -federation lists 4 resources, 1 template and 2 prompts;
  // drifty's changed tool waits for approval.
  const demoRow = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'demo', exact: true }) });
  const driftyRow = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'drifty', exact: true }) });
  const headers = await page.getByRole('columnheader').allTextContents();
  const cellOf = async (row, col) => row.getByRole('cell').nth(headers.indexOf(col)).textContent();
  await retry(async () => { await open(page, 'Overview'); await open(page, 'Servers'); await demoRow.waitFor({ timeout: WAIT }); },
    async () => (await cellOf(demoRow, 'resources')) === '4 + 1 templates' && (await cellOf(demoRow, 'prompts')) === '2',
    'demo\'s resource and prompt counts on Servers');
  check(/^\d+$/.test(await cellOf(demoRow, 'tools')) && Number(await cellOf(demoRow, 'tools')) > 10, `demo's tool count: ${await cellOf(demoRow, 'tools')}`);
  check(/\bpending [1-9]/.test(await cellOf(driftyRow, 'pins')), `drifty's pin counts: ${await cellOf(driftyRow, 'pins')}`);
  await shot(page, 'servers.png');
  ok('servers: tool, resource, prompt and pin counts');
  await axe(page, 'Servers');
  await page.getByLabel('Server name').fill('broken');
  await page.getByLabel('Server definition (JSON)').fill('{"type": "http", "url": "ftp://nowhere"}');
  await page.getByRole('button', { name: 'Save server' }).click();
  const refusal = page.getByRole('alert').filter({ hasText: 'Not saved' });
  await refusal.waitFor({ timeout: WAIT });
  check(/url/.test(await refusal.textContent()), `the refusal does not name the field: ${await refusal.textContent()}`);
  await page.getByLabel('Server name').fill('demo2');
  await page.getByLabel('Server definition (JSON)').fill(JSON.stringify({ type: 'stdio', command: DEMO_BIN, args: ['-transport', 'stdio'] }));
  await page.getByRole('button', { name: 'Save server' }).click();
  await page.getByText('Server demo2 saved').waitFor({ timeout: WAIT });
  await page.getByRole('cell', { name: 'demo2', exact: true }).waitFor({ timeout: WAIT });
  await open(page, 'Catalog and playground');
  await selectTool(page, 'demo2_echo');
  ok(step);

  step = 'playground: call with progress';
  await axe(page, 'Catalog and playground');
  await selectTool(page, 'demo_progress');
  await page.getByLabel('steps').fill('3');
  await recordStatus(page);
  await page.getByRole('button', { name: 'Call', exact: true }).click();
  await page.getByText('done after 3 steps').waitFor({ timeout: WAIT });
  const seen = await page.evaluate(() => window.__status);
  check(['step 1 of 3', 'step 2 of 3', 'step 3 of 3'].every((s) => seen.includes(s)), `progress shown: ${JSON.stringify(seen)}`);
  check(!/^(null|undefined)$/m.test(await page.locator('main').innerText()), 'the page shows a stray null or undefined');
  await shot(page, 'catalog.png');
  ok(step);

  step = 'catalog: search finds a resource, reads it (text and binary)';
  await searchIn(page, 'Resources', 'greeting');
  await page.getByRole('button', { name: 'mcpbus://demo/demo://greeting', exact: true }).click();
  await page.getByRole('heading', { level: 2, name: 'mcpbus://demo/demo://greeting', exact: true }).waitFor({ timeout: WAIT });
  await page.getByRole('region', { name: 'Playground' }).getByRole('button', { name: 'Read', exact: true }).click();
  await page.getByRole('region', { name: 'Contents of mcpbus://demo/demo://greeting' }).getByText('hello from demo', { exact: true }).waitFor({ timeout: WAIT });
  // An MCP App's HTML is shown as text, never rendered in the console.
  await searchIn(page, 'Resources', 'widget');
  await page.getByRole('button', { name: 'ui://demo/widget/app.html', exact: true }).click();
  await page.getByRole('region', { name: 'Playground' }).getByRole('button', { name: 'Read', exact: true }).click();
  await page.getByRole('region', { name: 'Contents of ui://demo/widget/app.html' }).locator('pre.text').filter({ hasText: '<!doctype html><p>demo</p>' }).waitFor({ timeout: WAIT });
  check(await page.locator('main iframe').count() === 0 && await page.getByRole('region', { name: 'Playground' }).locator('p', { hasText: /^demo$/ }).count() === 0,
    'the MCP App\'s HTML was rendered');
  await searchIn(page, 'Resources', 'demo://blob');
  await page.getByRole('button', { name: 'mcpbus://demo/demo://blob', exact: true }).click();
  await page.getByRole('region', { name: 'Playground' }).getByRole('button', { name: 'Read', exact: true }).click();
  const dlLink = page.getByRole('link', { name: /^Download blob \(8 bytes, binary\)$/ });
  await dlLink.waitFor({ timeout: WAIT });
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: WAIT }), dlLink.click()]);
  const bytes = [...readFileSync(await dl.path())];
  check(JSON.stringify(bytes) === JSON.stringify([0, 1, 2, 254, 255, 109, 99, 112]), `the downloaded blob: ${bytes}`);
  ok(step);

  step = 'catalog: a resource template, its argument completed';
  await searchIn(page, 'Resources', 'notes');
  await page.getByRole('button', { name: 'mcpbus://demo/demo://notes/{id}', exact: true }).click();
  await page.getByLabel('id (required)').fill('alp');
  // The server completes "alp": alpha and alpine, not beta.
  await page.waitForFunction(() => {
    const offered = [...document.querySelectorAll('.suggest button')].map((b) => b.getAttribute('aria-label'));
    return offered.includes('Use alpha for id') && offered.includes('Use alpine for id') && !offered.includes('Use beta for id');
  }, null, { timeout: WAIT });
  await page.getByRole('button', { name: 'Use alpine for id', exact: true }).click();
  check(await page.getByLabel('id (required)').inputValue() === 'alpine', 'the suggestion did not fill the field');
  await page.getByRole('region', { name: 'Playground' }).getByRole('button', { name: 'Read', exact: true }).click();
  await page.getByRole('region', { name: 'Contents of mcpbus://demo/demo://notes/alpine' }).getByText('note alpine from demo').waitFor({ timeout: WAIT });
  ok(step);

  step = 'catalog: search finds a prompt, gets it with a completed argument';
  await searchIn(page, 'Prompts', 'greet');
  await page.getByRole('button', { name: 'demo_greet', exact: true }).click();
  await page.getByRole('heading', { level: 2, name: 'demo_greet', exact: true }).waitFor({ timeout: WAIT });
  await page.getByLabel('name (required)').fill('Al');
  await page.getByRole('button', { name: 'Use Albert for name', exact: true }).click();
  await page.getByRole('button', { name: 'Get prompt', exact: true }).click();
  const msgs = page.getByRole('region', { name: 'Messages' });
  await msgs.getByText('Hello, Albert! (demo)').waitFor({ timeout: WAIT });
  await msgs.getByText('Embedded resource mcpbus://demo/demo://greeting').waitFor({ timeout: WAIT });
  await axe(page, 'Catalog and playground (a prompt)');
  await shot(page, 'prompt.png');
  ok(step);

  step = 'playground: a resource link in a result, followed and read';
  await searchIn(page, 'Tools', '');
  await selectTool(page, 'demo_link');
  await page.getByRole('button', { name: 'Call', exact: true }).click();
  await page.getByRole('button', { name: 'Read the linked resource mcpbus://demo/demo://greeting', exact: true }).click();
  await page.getByRole('region', { name: 'Result' }).getByRole('region', { name: 'Contents of mcpbus://demo/demo://greeting' })
    .getByText('hello from demo', { exact: true }).waitFor({ timeout: WAIT });
  ok(step);

  step = 'playground: an upstream result carrying markup stays text';
  await selectTool(page, 'demo_echo');
  const payload = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>';
  await page.getByLabel('message (required)').fill(payload);
  await page.getByRole('button', { name: 'Call', exact: true }).click();
  await page.locator('section.result pre.text').filter({ hasText: payload }).waitFor({ timeout: WAIT });
  check(await page.evaluate(() => window.__pwned === undefined && document.querySelectorAll('main img, main script').length === 0),
    'markup from a tool result was interpreted');
  ok(step);

  step = 'playground: cancel';
  await selectTool(page, 'demo_block');
  await page.getByRole('button', { name: 'Call', exact: true }).click();
  const cancel = page.getByRole('button', { name: 'Cancel', exact: true });
  await page.waitForFunction(() => !document.querySelector('.playground button[type=button]').disabled, null, { timeout: WAIT });
  await cancel.click();
  await page.getByText('The call was cancelled').waitFor({ timeout: WAIT });
  await selectTool(page, 'demo_cancellations');
  await retry(async () => {
    await page.getByRole('button', { name: 'Call', exact: true }).click();
    await page.getByText('Structured content').waitFor({ timeout: WAIT });
  }, async () => {
    const txt = await page.locator('section.result pre.json').last().textContent();
    const r = JSON.parse(txt);
    return r.blocked_cancelled >= 1 && r.in_flight === 0;
  }, 'the upstream to see the cancellation');
  ok(step);

  step = 'durable task finishes live';
  await selectTool(page, 'demo_submit_report');
  await page.getByLabel('topic (required)').fill('browser');
  await page.getByLabel('steps').fill('2');
  await page.getByRole('button', { name: 'Call', exact: true }).click();
  const follow = page.getByRole('link', { name: /^Follow task / });
  await follow.waitFor({ timeout: WAIT });
  await page.evaluate(() => { window.__noReload = true; });
  await follow.click();
  await heading(page, 'Tasks').waitFor({ timeout: WAIT });
  await page.locator('.task-status', { hasText: 'completed' }).waitFor({ timeout: WAIT });
  check(await page.evaluate(() => window.__noReload === true), 'the Tasks page reloaded');
  ok(step);

  step = 'tasks: every thread, cancel from the page, live';
  const sub = await fetch(`${BASE}/api/mcp/tools/demo_submit_report/call`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${ADMIN_KEY}` },
    body: JSON.stringify({ arguments: { topic: 'long', steps: 1000 }, thread_id: 'elsewhere' }) });
  const subBody = await sub.json();
  const longId = (subBody.structured_content || {}).task_id || JSON.parse(subBody.content[0].text).task_id;
  check(sub.ok && longId, `REST submit in another thread: ${sub.status} ${JSON.stringify(subBody)}`);
  await page.getByRole('button', { name: 'Refresh', exact: true }).click();
  const longRow = page.getByRole('row').filter({ has: page.getByRole('cell', { name: longId, exact: true }) });
  await longRow.getByRole('cell', { name: 'elsewhere', exact: true }).waitFor({ timeout: WAIT });
  await page.getByText(/^Live: /).first().waitFor({ timeout: WAIT });
  await longRow.getByRole('button', { name: `Show task ${longId}` }).click();
  await page.getByRole('heading', { level: 2, name: `Task ${longId}` }).waitFor({ timeout: WAIT });
  await page.getByRole('button', { name: 'Cancel task', exact: true }).click();
  // The poller cancels upstream; its event (not a poll of the page) shows it.
  await longRow.getByText('cancelled', { exact: true }).waitFor({ timeout: WAIT });
  await page.locator('.task-status', { hasText: /^cancelled$/ }).waitFor({ timeout: WAIT });
  await page.getByText(`Live: task ${longId} is cancelled`).waitFor({ timeout: WAIT });
  check(await page.evaluate(() => window.__noReload === true), 'the Tasks page reloaded');
  // Another user's task: its event reaches the admin's page live.
  const aliceSub = await fetch(`${BASE}/api/mcp/tools/demo_submit_report/call`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${ALICE_KEY}` },
    body: JSON.stringify({ arguments: { topic: 'alice', steps: 1 }, thread_id: 'alice-thread' }) });
  const aliceBody = await aliceSub.json();
  aliceTask = (aliceBody.structured_content || {}).task_id || JSON.parse(aliceBody.content[0].text).task_id;
  check(aliceSub.ok && aliceTask, `alice's REST submit: ${aliceSub.status} ${JSON.stringify(aliceBody)}`);
  const otherRow = page.getByRole('region', { name: 'Other users\' tasks (from their events since this page opened)' })
    .getByRole('row').filter({ has: page.getByRole('cell', { name: aliceTask, exact: true }) });
  await otherRow.getByRole('cell', { name: 'alice', exact: true }).waitFor({ timeout: WAIT });
  await otherRow.getByRole('cell', { name: 'completed', exact: true }).waitFor({ timeout: WAIT });
  check(await page.getByRole('region', { name: 'Other users\' tasks (from their events since this page opened)' }).count() === 1, 'the other users\' section');
  await axe(page, 'Tasks');
  await shot(page, 'tasks.png');
  ok(step);

  step = 'audit: read and follow live';
  await open(page, 'Audit');
  await page.getByRole('cell', { name: 'demo_progress', exact: true }).first().waitFor({ timeout: WAIT });
  await page.getByRole('cell', { name: 'root', exact: true }).first().waitFor({ timeout: WAIT });
  await axe(page, 'Audit');
  await page.getByLabel('Follow live').check();
  await page.getByText('Following live').waitFor({ timeout: WAIT });
  const r = await fetch(`${BASE}/api/mcp/tools/demo_add/call`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${ADMIN_KEY}` },
    body: JSON.stringify({ arguments: { a: 1, b: 2 } }) });
  check(r.ok, `REST call for the live audit: ${r.status}`);
  await page.getByRole('cell', { name: 'demo_add', exact: true }).first().waitFor({ timeout: WAIT });
  await shot(page, 'audit.png');
  ok(step);

  step = 'my connections: a personal connection';
  await open(page, 'My connections');
  await page.getByLabel('Connection name').fill('rootconn');
  await page.getByLabel('Connection definition (JSON)').fill('{"type": "http", "url": "https://8.8.8.8/mcp"}');
  await page.getByRole('button', { name: 'Add connection' }).click();
  await page.getByRole('cell', { name: 'rootconn', exact: true }).waitFor({ timeout: WAIT });
  ok(step);

  step = 'my connections: connect an OAuth account';
  const ghRow = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'gh', exact: true }) });
  await ghRow.getByRole('cell', { name: 'needs authorization', exact: true }).waitFor({ timeout: WAIT });
  await axe(page, 'My connections');
  await ghRow.getByRole('button', { name: 'Connect gh', exact: true }).click();
  // oidc-provider's own sign-in and consent pages, in the same browser.
  await page.waitForURL((u) => u.href.startsWith(ISSUER), { timeout: WAIT });
  await page.locator('input[name=login]').fill('root');
  await page.locator('input[name=password]').fill('any');
  await page.locator('button[type=submit]').click();
  await page.getByRole('button', { name: 'Continue' }).click({ timeout: WAIT });
  await page.waitForURL((u) => u.href.startsWith(`${BASE}/oauth/callback`), { timeout: WAIT });
  await heading(page, 'Account connected').waitFor({ timeout: WAIT });
  await page.getByRole('link', { name: 'open the console' }).click();
  await heading(page, 'My connections').waitFor({ timeout: WAIT });
  await ghRow.getByRole('cell', { name: 'connected', exact: true }).waitFor({ timeout: WAIT });
  const scopes = await ghRow.getByRole('cell').nth(2).textContent();
  check(/mcp:read/.test(scopes), `the connected account's scopes: ${scopes}`);
  await page.getByRole('heading', { level: 2, name: 'OAuth accounts' }).evaluate((el) => el.scrollIntoView());
  await shot(page, 'connections.png');
  ok(step);

  step = 'playground: call the connected server as root';
  await open(page, 'Catalog and playground');
  await selectTool(page, 'gh_whoami');
  await page.getByRole('button', { name: 'Call', exact: true }).click();
  await page.locator('section.result pre.json').filter({ hasText: '"X-Demo-Oauth-Subject": "root"' }).waitFor({ timeout: WAIT });
  ok(step);

  step = 'plain user: another user\'s connections, by page and by URL';
  {
    const actx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const apage = await actx.newPage();
    await signIn(apage, ALICE_KEY);
    await apage.goto(`${BASE}/ui/connections`);
    await heading(apage, 'My connections').waitFor({ timeout: WAIT });
    const aRow = apage.getByRole('row').filter({ has: apage.getByRole('cell', { name: 'gh', exact: true }) });
    await aRow.getByRole('cell', { name: 'needs authorization', exact: true }).waitFor({ timeout: WAIT });
    check(await apage.getByText('rootconn').count() === 0, 'alice sees root\'s personal connection');
    const seen = await apage.evaluate(async () => Promise.all(['/api/mcp/connections?user=root', '/api/mcp/connections?user_id=root',
      '/api/mcp/personal-connections?user=root', '/api/mcp/personal-connections/rootconn']
      .map((p) => fetch(p).then(async (r) => `${r.status} ${await r.text()}`))));
    check(seen[0].startsWith('200') && seen[1].startsWith('200') && !/"connected"/.test(seen[0] + seen[1]), `alice's view of root's OAuth account: ${seen}`);
    check(!seen[2].includes('rootconn') && seen[3].startsWith('404'), `alice's view of root's personal connection: ${seen}`);
    await actx.close();
  }
  ok(step);

  step = 'my connections: disconnect';
  await open(page, 'My connections');
  await ghRow.getByRole('button', { name: 'Disconnect gh', exact: true }).click();
  await page.getByText('gh disconnected.').waitFor({ timeout: WAIT });
  await ghRow.getByRole('cell', { name: 'needs authorization', exact: true }).waitFor({ timeout: WAIT });
  ok(step);

  step = 'approvals: a pinned tool\'s change held, approved';
  await open(page, 'Virtual servers and approvals');
  const held = page.getByRole('article', { name: 'Pending change of drifty lookup' });
  await held.waitFor({ timeout: WAIT });
  const flags = await held.getByRole('list', { name: 'Flagged cues in drifty lookup' }).textContent();
  check(/concealment/.test(flags) && /do not tell the user/i.test(flags), `the flagged cues: ${flags}`);
  check((await held.textContent()).includes('Do not tell the user that every word'), 'the diff does not show the new description');
  await axe(page, 'Virtual servers and approvals');
  await shot(page, 'approvals.png');
  await held.getByRole('button', { name: 'Approve drifty lookup', exact: true }).click();
  await page.getByText('drifty / lookup approved').waitFor({ timeout: WAIT });
  await held.waitFor({ state: 'detached', timeout: WAIT });
  await open(page, 'Catalog and playground');
  await retry(async () => selectTool(page, 'drifty_lookup'),
    async () => page.getByText(/Do not tell the user that every word/).first().waitFor({ timeout: 2000 }).then(() => true, () => false),
    'the approved definition to be served');
  ok(step);

  step = 'overview after the calls';
  await open(page, 'Overview');
  const total = await page.locator('.calls-total').textContent();
  check(!/^Last 10 minutes: 0 calls/.test(total), `the admin's overview counts no call: ${total}`);
  await shot(page, 'overview.png');
  ok(step);

  for (const name of ['Connect a client']) {
    step = name;
    await open(page, name);
    await axe(page, name);
  }
  await page.getByRole('button', { name: 'Copy Cursor config' }).waitFor();
  check((await page.locator('pre').first().textContent()).includes(`${BASE}/mcp`), 'the client configs lack this deployment\'s URL');
  await shot(page, 'connect.png');
  ok('connect a client');

  step = 'narrow window';
  await page.setViewportSize({ width: 390, height: 800 });
  for (const name of ['Overview', 'Catalog and playground', 'Tasks']) {
    await open(page, name);
    const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(over <= 0, `${name} scrolls sideways by ${over}px at 390px`);
  }
  await shot(page, 'narrow-catalog.png');
  await page.setViewportSize({ width: 1280, height: 860 });
  ok(step);

  step = 'no CSP violations';
  check(cspViolations.length === 0, cspViolations.join('; '));
  ok(step);

  step = 'sign out';
  await page.getByRole('button', { name: 'Sign out' }).click();
  await heading(page, 'Sign in').waitFor({ timeout: WAIT });
  const after = await page.evaluate(async () => (await fetch('/api/console/session')).status);
  check(after === 401, `session after sign-out: ${after}`);
  ok(step);
  await ctx.close();
}

async function plainUser(browser) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await ctx.newPage();
  step = 'plain user: sign in';
  await signIn(page, ALICE_KEY);
  const links = await page.getByRole('navigation', { name: 'Console pages' }).getByRole('link').allTextContents();
  check(!links.includes('Servers') && !links.includes('Audit') && !links.includes('Virtual servers and approvals'), `a user sees admin links: ${links}`);
  ok(step);

  step = 'plain user: overview counts her known calls per minute';
  const before = await (await fetch(`${BASE}/api/mcp/stats/calls?minutes=10`, { headers: { Authorization: `Bearer ${ALICE_KEY}` } })).json();
  const [calls0, errors0] = ['calls', 'errors'].map((k) => before.minutes.reduce((a, m) => a + m[k], 0));
  for (const [tool, args] of [['demo_add', { a: 1, b: 2 }], ['demo_fail', {}]]) {
    const r = await fetch(`${BASE}/api/mcp/tools/${tool}/call`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${ALICE_KEY}` },
      body: JSON.stringify({ arguments: args }) });
    check(r.ok, `alice's REST call of ${tool}: ${r.status}`);
  }
  // The audit records are written in the background: reload until in.
  await retry(async () => { await page.goto(`${BASE}/ui/`); await page.locator('.calls-total').waitFor({ timeout: WAIT }); },
    async () => (await page.locator('.calls-total').textContent()) === `Last 10 minutes: ${calls0 + 2} calls, ${errors0 + 1} failed (your calls).`,
    'alice\'s two calls (one failed) on Overview');
  await axe(page, 'Overview as a user');
  ok(step);

  step = 'plain user: admin pages by URL';
  for (const [path, title] of [['servers', 'Servers'], ['audit', 'Audit'], ['virtual-servers', 'Virtual servers and approvals']]) {
    await page.goto(`${BASE}/ui/${path}`);
    await heading(page, title).waitFor({ timeout: WAIT });
    await page.getByRole('alert').filter({ hasText: 'Only administrators' }).waitFor({ timeout: WAIT });
    check(await page.locator('table').count() === 0, `${title} shows data to a user`);
  }
  const statuses = await page.evaluate(async () => Promise.all(['/api/mcp/config', '/api/mcp/servers', '/api/mcp/audit', '/api/mcp/pins']
    .map((p) => fetch(p).then((r) => r.status))));
  check(statuses.every((s) => s === 403), `admin routes with a user's cookie: ${statuses}`);
  ok(step);

  step = 'plain user: only their own connections and tasks';
  await page.goto(`${BASE}/ui/connections`);
  await heading(page, 'My connections').waitFor({ timeout: WAIT });
  await page.getByText('None.').first().waitFor({ timeout: WAIT });
  check(await page.getByText('rootconn').count() === 0, 'alice sees root\'s connection');
  await page.goto(`${BASE}/ui/tasks`);
  await page.getByText(/^Live: /).waitFor({ timeout: WAIT });
  await page.getByRole('cell', { name: aliceTask, exact: true }).waitFor({ timeout: WAIT });
  const listed = await page.locator('main table tbody tr td:first-child code').allTextContents();
  check(listed.length === 1 && listed[0] === aliceTask && await page.getByText('elsewhere').count() === 0, `alice's Tasks page lists ${listed}, want only her own ${aliceTask}`);
  check(await page.getByRole('region', { name: /^Other users/ }).count() === 0, 'a user\'s Tasks page has the other users\' section');
  ok(step);

  step = 'plain user: a guardrail-denied server\'s resources and prompts, listed nor read';
  await page.goto(`${BASE}/ui/catalog`);
  await heading(page, 'Catalog and playground').waitFor({ timeout: WAIT });
  await searchIn(page, 'Resources', 'greeting');
  await page.getByRole('button', { name: 'mcpbus://demo/demo://greeting', exact: true }).waitFor({ timeout: WAIT });
  check(await page.getByRole('button', { name: /^mcpbus:\/\/secret\// }).count() === 0, 'alice is listed the denied server\'s resources');
  await searchIn(page, 'Resources', 'secret');
  await page.getByText('0 resources and templates match').waitFor({ timeout: WAIT });
  await searchIn(page, 'Prompts', 'greet');
  await page.getByRole('button', { name: 'demo_greet', exact: true }).waitFor({ timeout: WAIT });
  check(await page.getByRole('button', { name: 'secret_greet' }).count() === 0, 'alice is listed the denied server\'s prompt');
  const denied = await page.evaluate(async () => {
    const { csrf_token: csrf } = await (await fetch('/api/console/session')).json();
    const post = (path, body) => fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf }, body: JSON.stringify(body) })
      .then(async (r) => `${r.status} ${await r.text()}`);
    return [await post('/api/mcp/resources/read', { uri: 'mcpbus://secret/demo://greeting', thread_id: 'console' }),
      await post('/api/mcp/resources/read', { uri: 'mcpbus://secret/demo://notes/alpha', thread_id: 'console' }),
      await post('/api/mcp/prompts/secret_greet', { arguments: { name: 'x' }, thread_id: 'console' }),
      await post('/api/mcp/completion', { ref: { type: 'ref/prompt', name: 'secret_greet' }, argument: { name: 'name', value: 'A' }, thread_id: 'console' }),
      await fetch('/api/mcp/prompts/secret_greet?thread_id=console').then(async (r) => `${r.status} ${await r.text()}`)];
  });
  // Its resources are mapped, then refused; its prompt is not one of hers.
  check(denied.slice(0, 2).every((d) => d.startsWith('403') && d.includes('guardrail_denied')) && denied.slice(2).every((d) => d.startsWith('404') && d.includes('not_found')), `alice's reads of the denied server: ${JSON.stringify(denied)}`);
  check(!denied.some((d) => d.includes('SECRET')), `the denied server's content reached alice: ${denied}`);
  ok(step);

  step = 'CSRF: a change without the token';
  const csrf = await page.evaluate(async () => {
    const r = await fetch('/api/mcp/personal-connections', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'forged', server: { type: 'http', url: 'https://8.8.8.8/mcp' } }) });
    return [r.status, (await r.json()).error.message];
  });
  check(csrf[0] === 403 && csrf[1].includes('X-CSRF-Token'), `a change without the CSRF token: ${csrf}`);
  ok(step);

  step = 'cross-origin page';
  const evil = createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end('<!doctype html><title>evil</title><p>evil</p>');
  });
  await new Promise((r) => evil.listen(0, '127.0.0.1', r));
  const evilPage = await ctx.newPage();
  await evilPage.goto(`http://127.0.0.1:${evil.address().port}/`);
  const tries = await evilPage.evaluate(async (base) => {
    const out = [];
    const body = JSON.stringify({ name: 'evil', server: { type: 'http', url: 'https://8.8.8.8/mcp' } });
    // A simple request (no preflight) carrying the cookie.
    try { await fetch(`${base}/api/mcp/personal-connections`, { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'Content-Type': 'text/plain' }, body }); out.push('sent'); } catch (e) { out.push('blocked'); }
    // A JSON request: needs a preflight the API does not grant.
    try { const r = await fetch(`${base}/api/mcp/personal-connections`, { method: 'POST', credentials: 'include', headers: { 'Content-Type': 'application/json' }, body }); out.push(`read ${r.status}`); } catch (e) { out.push('blocked'); }
    // Reading the user's data cross-origin.
    try { const r = await fetch(`${base}/api/mcp/personal-connections`, { credentials: 'include' }); out.push(`read ${await r.text()}`); } catch (e) { out.push('blocked'); }
    return out;
  }, BASE);
  check(!tries.some((t) => t.startsWith('read')), `the cross-origin page read an answer: ${tries}`);
  evil.close();
  await evilPage.close();
  const stored = await page.evaluate(async () => (await (await fetch('/api/mcp/personal-connections')).json()).connections.map((c) => c.name));
  check(!stored.includes('evil') && !stored.includes('forged'), `a refused change was stored: ${stored}`);
  ok(step);
  await ctx.close();
}

// catalog10000 opens the catalog of 10,000 tools: every catalog request
// of the page asks for one page of 25, the list shows 25, Next page is
// one more such request, and a search finds the last server's last tool.
async function catalog10000(browser) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await ctx.newPage();
  const asked = [];
  page.on('request', (r) => { const u = new URL(r.url()); if (u.pathname === '/api/mcp/tools') asked.push(u.searchParams); });
  step = 'catalog of 10,000: first page';
  await signIn(page, ADMIN_KEY);
  await page.getByText('Tools you can call').waitFor({ timeout: WAIT });
  asked.length = 0; // the Overview asks for one tool to count them
  await open(page, 'Catalog and playground');
  await page.getByText('10000 tools match; showing 1–25.', { exact: false }).waitFor({ timeout: WAIT });
  const tools = page.getByRole('region', { name: 'Tools' }).getByRole('listitem');
  check(await tools.count() === 25, `the list shows ${await tools.count()} tools`);
  check(asked.length === 1 && asked[0].get('limit') === '25' && asked[0].get('offset') === '0', `catalog requests: ${asked.map(String)}`);
  await axe(page, 'Catalog and playground (10,000 tools)');
  ok(step);

  step = 'catalog of 10,000: next page';
  await page.getByRole('button', { name: 'Next page' }).click();
  await page.getByText('10000 tools match; showing 26–50.', { exact: false }).waitFor({ timeout: WAIT });
  check(asked.length === 2 && asked[1].get('limit') === '25' && asked[1].get('offset') === '25', `catalog requests: ${asked.map(String)}`);
  check(await tools.count() === 25, `the second page shows ${await tools.count()} tools`);
  ok(step);

  step = 'catalog of 10,000: search deep';
  await page.getByLabel('Search tools').fill('s019_tool_499');
  await page.getByText('1 tool matches; showing 1–1.', { exact: false }).waitFor({ timeout: WAIT });
  await page.getByRole('button', { name: 's019_tool_499', exact: true }).click();
  await page.getByRole('heading', { level: 2, name: 's019_tool_499', exact: true }).waitFor({ timeout: WAIT });
  await page.getByText('Tool 499 of server 19').first().waitFor({ timeout: WAIT });
  check(asked.every((q) => q.get('limit') === '25'), `a catalog request asked for more than a page: ${asked.map(String)}`);
  check(asked.slice(2).every((q) => q.get('search')), `searches: ${asked.map(String)}`);
  ok(step);
  await ctx.close();
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-background-networking', '--disable-dev-shm-usage'],
});
try {
  if (full) {
    await admin(browser);
    await plainUser(browser);
  } else if (SUITE === 'catalog-10000') {
    await catalog10000(browser);
  } else {
    throw new Error(`unknown CONSOLE_SUITE ${SUITE}`);
  }
  console.log('PASS');
} catch (e) {
  console.log(`FAIL ${step}: ${e.message.split('\n')[0]}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
