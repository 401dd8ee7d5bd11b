#!/usr/bin/env node
// Browser test of roster's web console.
//
//   node tests/console/console_flow.mjs --server 127.0.0.1:8848 --username nacos --password P \
//        --namespace NSID --service NAME --shots DIR [--watchdog 120] [--chromium /usr/bin/chromium]
//
// Drives a real roster (auth on) that serves the console at http://SERVER/ with a
// system Chromium. Prints one JSON line per step on stdout. Exit codes:
//   0 every step passed
//   1 a check failed   (stderr: "FAIL step: reason", the page URL; DIR/failure-<step>.png)
//   2 unexpected error (same report)
//   3 the whole-run watchdog fired
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

// ------------------------------------------------------------------ arguments

function parseArgs(argv) {
  const out = {
    server: '127.0.0.1:8848',
    username: 'nacos',
    password: process.env.ROSTER_PASSWORD ?? '',
    namespace: 'console-test',
    service: 'console-svc',
    shots: 'console-shots',
    watchdog: 120,
    chromium: process.env.CHROMIUM ?? '/usr/bin/chromium',
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(a);
    if (!m) usage(`unexpected argument ${a}`);
    const key = m[1];
    const val = m[2] ?? argv[++i];
    if (val === undefined) usage(`--${key} needs a value`);
    if (!(key in out)) usage(`unknown option --${key}`);
    out[key] = key === 'watchdog' ? Number(val) : val;
  }
  if (!out.password) usage('--password is required (or ROSTER_PASSWORD)');
  if (!/^[A-Za-z0-9_-]{1,100}$/.test(out.namespace)) usage('--namespace must be letters, digits, _ or -');
  if (!(out.watchdog > 0)) usage('--watchdog must be a positive number of seconds');
  return out;
}

function usage(msg) {
  console.error(`console_flow: ${msg}`);
  console.error(
    'usage: node console_flow.mjs --server HOST:PORT --username U --password P --namespace NSID --service NAME --shots DIR [--watchdog SECS] [--chromium PATH]',
  );
  process.exit(2);
}

const args = parseArgs(process.argv);
const BASE = `http://${args.server}`;
const NS = args.namespace;
const NS_EMPTY = `${NS}-empty`;
// Made, changed and deleted through the API while their page is open.
const NS_API = `${NS}-api`;
const USER_API = `${NS}-user`;
const TASK_API = `${NS}-api`;
const SVC = args.service;
const GROUP = 'DEFAULT_GROUP';
const PORT = Number(args.server.split(':').pop());
const ADDR = `127.0.0.1:${PORT}`;
// Sync tasks: the source is a closed loopback port, so the runner reports "error".
const TASK = `${NS}-sync`;
const TASK_DRY = `${NS}-dry`;
const SOURCE = 'etcd://127.0.0.1:1?layout=go-micro';
const BAD_SOURCE = 'nosuch://127.0.0.1:1';
const FILTER = 'helloworld*,!*-canary';
const STATE_MS = 30_000;
const ACTION_MS = 10_000;
fs.mkdirSync(args.shots, { recursive: true });

// ------------------------------------------------------------------ reporting

class CheckFailed extends Error {}

const started = Date.now();
let browser = null;
let page = null;
let currentStep = 'setup';
const pageErrors = [];
let watchdogFired = false;

function emit(obj) {
  if (watchdogFired) return; // the watchdog has reported; the rest of the run is noise
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function check(cond, reason) {
  if (!cond) throw new CheckFailed(reason);
}

const watchdog = setTimeout(async () => {
  console.error(`FAIL ${currentStep}: watchdog: the run took longer than ${args.watchdog} s`);
  if (page) console.error(`page: ${page.url()}`);
  emit({ step: currentStep, ok: false, error: 'watchdog', elapsedMs: Date.now() - started });
  watchdogFired = true;
  // Playwright kills the browser it launched when this process exits.
  setTimeout(() => process.exit(3), 3000).unref();
  try {
    await browser?.close();
  } catch {
    /* exiting anyway */
  }
  process.exit(3);
}, args.watchdog * 1000);
watchdog.unref();

async function step(name, fn) {
  currentStep = name;
  const t0 = Date.now();
  const detail = (await fn()) ?? {};
  if (pageErrors.length) throw new CheckFailed(`uncaught error in the page: ${pageErrors[0]}`);
  emit({ step: name, ok: true, ms: Date.now() - t0, ...detail });
}

async function shot(name) {
  const file = path.join(args.shots, `${name}.png`);
  // toasts come and go with timing; keep them out of the page pictures
  await page.screenshot({
    path: file,
    fullPage: true,
    animations: 'disabled',
    timeout: ACTION_MS,
    style: '.ant-message { display: none !important; }',
  });
  return file;
}

// ------------------------------------------------------------------ the API, directly

let apiToken = null;

async function api(method, p, params = {}, { allowError = false } = {}) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) qs.set(k, String(v));
  let url = BASE + p;
  let body;
  if (method === 'GET' || method === 'DELETE') url += (qs.size ? '?' : '') + qs;
  else body = qs;
  const headers = apiToken ? { Authorization: `Bearer ${apiToken}` } : {};
  let res;
  try {
    res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(ACTION_MS) });
  } catch (e) {
    throw new Error(`${method} ${p}: ${e?.cause?.message ?? e?.message ?? e}`);
  }
  const text = await res.text();
  if (!res.ok && !allowError) throw new Error(`${method} ${p} -> ${res.status}: ${text}`);
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
}

/** A JSON request as the admin. */
async function apiJson(method, p, body) {
  let res;
  try {
    res = await fetch(BASE + p, {
      method,
      headers: { Authorization: `Bearer ${apiToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(ACTION_MS),
    });
  } catch (e) {
    throw new Error(`${method} ${p}: ${e?.cause?.message ?? e?.message ?? e}`);
  }
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p} -> ${res.status}: ${text}`);
  return JSON.parse(text);
}

async function apiLogin() {
  const r = await api('POST', '/nacos/v1/auth/login', { username: args.username, password: args.password });
  apiToken = r.json.accessToken;
}

async function namespaceIds() {
  const r = await api('GET', '/nacos/v1/console/namespaces');
  return (r.json?.data ?? []).map((n) => n.namespace);
}

const taskPath = (name) => `/api/v1/sync/tasks/${encodeURIComponent(name)}`;

/** The task as the API shows it, or null when there is none. */
async function syncTask(name) {
  const r = await api('GET', taskPath(name), {}, { allowError: true });
  if (r.status === 404) return null;
  check(r.status === 200, `GET ${taskPath(name)} answered ${r.status}: ${r.text}`);
  return r.json;
}

async function listHosts() {
  const r = await api('GET', '/nacos/v1/ns/instance/list', { namespaceId: NS, serviceName: SVC });
  return r.json?.hosts ?? [];
}

// ------------------------------------------------------------------ page helpers

const tid = (id) => page.locator(`[data-testid="${id}"]`);
const row = (key) => page.locator(`tr[data-row-key="${key}"]`);

/** Clicks a control inside a dialog once the dialog's opening animation is over: a click
 *  that lands while antd is still zooming the dialog in can be lost. */
async function clickInDialog(locator) {
  await page.waitForFunction(
    () => !document.querySelector('.ant-zoom-appear, .ant-zoom-enter, .ant-zoom-leave'),
    null,
    { timeout: ACTION_MS },
  );
  await locator.click();
}

async function expectVisible(locator, what, timeout = ACTION_MS) {
  try {
    await locator.first().waitFor({ state: 'visible', timeout });
  } catch {
    throw new CheckFailed(`${what} did not show within ${timeout / 1000} s`);
  }
}

async function expectHidden(locator, what, timeout = ACTION_MS) {
  try {
    await locator.first().waitFor({ state: 'hidden', timeout });
  } catch {
    throw new CheckFailed(`${what} did not go away within ${timeout / 1000} s`);
  }
}

async function expectText(locator, expected, what, timeout = ACTION_MS) {
  const deadline = Date.now() + timeout;
  let last = null;
  while (Date.now() < deadline) {
    last = await locator
      .first()
      .textContent({ timeout: Math.max(100, deadline - Date.now()) })
      .catch(() => null);
    if (last !== null && (expected instanceof RegExp ? expected.test(last) : last.trim() === expected)) return last;
    await page.waitForTimeout(100);
  }
  throw new CheckFailed(`${what}: expected ${expected}, saw ${JSON.stringify(last)}`);
}

async function expectUrl(re, what) {
  try {
    await page.waitForURL(re, { timeout: ACTION_MS });
  } catch {
    throw new CheckFailed(`${what}: expected the URL to match ${re}, it is ${page.url()}`);
  }
}

/** Fills the new-sync-task dialog and submits it; the row appears, the dialog closes. */
async function createTaskInUi(name, { namespace, filter, dryRun }) {
  await tid('sync-create').click();
  await expectVisible(tid('sync-form-name'), 'the new-sync-task dialog');
  await tid('sync-form-name').fill(name);
  await tid('sync-form-source').fill(SOURCE);
  if (namespace) {
    await clickInDialog(tid('sync-form-namespace'));
    await page.keyboard.type(namespace);
    await tid(`sync-ns-option-${namespace}`).click();
  }
  if (filter) await tid('sync-form-services').fill(filter);
  if (dryRun) await tid('sync-form-dry-run').check();
  await clickInDialog(tid('sync-form-submit'));
  const err = tid('sync-form-error');
  const outcome = await Promise.race([
    row(name)
      .waitFor({ state: 'visible', timeout: ACTION_MS })
      .then(() => 'ok')
      .catch(() => 'timeout'),
    err
      .waitFor({ state: 'visible', timeout: ACTION_MS })
      .then(() => 'error')
      .catch(() => 'timeout'),
  ]);
  if (outcome === 'error') throw new CheckFailed(`creating sync task ${name} was refused: ${await err.textContent()}`);
  check(outcome === 'ok', `sync task ${name} did not appear in the table`);
  await expectHidden(tid('sync-form-form'), 'the new-sync-task dialog');
}

/** The state tag of a task reaches `state` (task events; no reload). */
async function expectState(name, state, timeout = ACTION_MS) {
  const sel = state.startsWith('!')
    ? `[data-testid="sync-state-${name}"]:not([data-state="${state.slice(1)}"])`
    : `[data-testid="sync-state-${name}"][data-state="${state}"]`;
  try {
    await page.locator(sel).waitFor({ state: 'visible', timeout });
  } catch {
    const seen = await tid(`sync-state-${name}`).getAttribute('data-state').catch(() => null);
    throw new CheckFailed(`state of sync task ${name}: expected ${state} within ${timeout / 1000} s, saw ${seen}`);
  }
}

async function deleteTaskInUi(name, body) {
  await tid(`sync-delete-${name}`).click();
  await expectVisible(tid('confirm-dialog'), `the confirmation to delete ${name}`);
  await expectText(tid('confirm-dialog'), body, `the confirmation to delete ${name}`);
  await clickInDialog(tid('confirm-ok'));
  await expectHidden(tid('confirm-dialog'), `the confirmation to delete ${name}`);
  await expectHidden(row(name), `the row of ${name}`);
  check((await syncTask(name)) === null, `sync task ${name} still exists in the API`);
}

/** Waits until the page's live badge says the event stream is connected. */
async function expectLive(what) {
  try {
    await page.locator('[data-testid="live-mode"][data-mode="live"]').waitFor({ state: 'visible', timeout: ACTION_MS });
  } catch {
    const mode = await tid('live-mode').getAttribute('data-mode').catch(() => null);
    throw new CheckFailed(`${what}: the live event stream did not connect (mode ${mode})`);
  }
}

/** Marks the page; {@link expectNoReload} fails if it was reloaded since. */
async function markPage() {
  await page.evaluate(() => {
    window.__consoleTestMarker = 'no-reload';
  });
}

async function expectNoReload(what) {
  const marker = await page.evaluate(() => window.__consoleTestMarker);
  check(marker === 'no-reload', `the page was reloaded ${what}`);
}

/** GET requests the page makes to `pathname` while `fn` runs (and `settleMs` after). */
async function requestsDuring(pathname, fn, settleMs) {
  const seen = [];
  const listener = (r) => {
    if (r.method() === 'GET' && new URL(r.url()).pathname === pathname) seen.push(r.url());
  };
  page.on('request', listener);
  try {
    await fn();
    await page.waitForTimeout(settleMs);
  } finally {
    page.off('request', listener);
  }
  return seen.length;
}

async function createNamespaceInUi(id, name) {
  await tid('ns-create').click();
  await expectVisible(tid('ns-form-id'), 'the create-namespace dialog');
  await tid('ns-form-id').fill(id);
  await tid('ns-form-name').fill(name);
  await tid('ns-form-desc').fill('created by the console browser test');
  await clickInDialog(tid('ns-form-submit'));
  const err = tid('ns-form-error');
  const outcome = await Promise.race([
    row(id)
      .waitFor({ state: 'visible', timeout: ACTION_MS })
      .then(() => 'ok')
      .catch(() => 'timeout'),
    err
      .waitFor({ state: 'visible', timeout: ACTION_MS })
      .then(() => 'error')
      .catch(() => 'timeout'),
  ]);
  if (outcome === 'error') throw new CheckFailed(`creating namespace ${id} was refused: ${await err.textContent()}`);
  check(outcome === 'ok', `namespace ${id} did not appear in the table`);
  await expectHidden(tid('ns-form-form'), 'the create-namespace dialog');
}

// ------------------------------------------------------------------ the flow

async function main() {
  await step('prepare', async () => {
    await apiLogin();
    const removed = [];
    // sync tasks first: one may import into NSID
    for (const name of [TASK, TASK_DRY, TASK_API]) {
      const d = await api('DELETE', taskPath(name), {}, { allowError: true });
      if (d.status === 200) removed.push(`sync task ${name}`);
    }
    const ids = await namespaceIds();
    // leftovers of an earlier run against the same server
    if (ids.includes(NS)) {
      const r = await api('GET', '/nacos/v1/ns/instance/list', { namespaceId: NS, serviceName: SVC }, { allowError: true });
      if (r.status === 200 || r.status === 404) {
        await api('DELETE', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC, ip: '127.0.0.1', port: PORT, ephemeral: false }, { allowError: true });
        await api('DELETE', '/nacos/v1/ns/service', { namespaceId: NS, serviceName: SVC, groupName: GROUP }, { allowError: true });
      }
      const d = await api('DELETE', '/nacos/v1/console/namespaces', { namespaceId: NS }, { allowError: true });
      check(d.status === 200, `namespace ${NS} exists from an earlier run and cannot be removed: ${d.text}`);
      removed.push(NS);
    }
    for (const id of [NS_EMPTY, NS_API]) {
      if (!ids.includes(id)) continue;
      await api('DELETE', '/nacos/v1/console/namespaces', { namespaceId: id }, { allowError: true });
      removed.push(id);
    }
    const u = await api('DELETE', '/nacos/v1/auth/users', { username: USER_API }, { allowError: true });
    if (u.status === 200) removed.push(`user ${USER_API}`);
    browser = await chromium.launch({
      executablePath: args.chromium,
      timeout: ACTION_MS,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, locale: 'en-US' });
    page = await context.newPage();
    page.setDefaultTimeout(ACTION_MS);
    page.setDefaultNavigationTimeout(ACTION_MS);
    page.on('pageerror', (e) => pageErrors.push(String(e?.message ?? e)));
    return { removedLeftovers: removed, browser: browser.version() };
  });

  await step('login', async () => {
    await page.goto(BASE + '/');
    await expectUrl(/#\/login/, 'opening / without a session');
    await expectVisible(tid('login-username'), 'the login form');
    await shot('login');
    await tid('login-username').fill(args.username);
    await tid('login-password').fill(args.password);
    await tid('login-submit').click();
    await expectUrl(/#\/namespaces/, 'after logging in');
    await expectVisible(tid('nav-namespaces'), 'the navigation menu');
    await expectText(tid('current-user'), new RegExp(args.username), 'the user name in the header');
    const stored = await page.evaluate(() => localStorage.getItem('roster.console.session'));
    check(stored && JSON.parse(stored).token, 'no token kept in localStorage after login');
    return { url: page.url() };
  });

  await step('create-namespace', async () => {
    await expectVisible(row('public'), 'the public namespace row');
    await createNamespaceInUi(NS, `Console test ${NS}`);
    await expectText(tid(`ns-service-count-${NS}`), '0', `service count of ${NS}`);
    await expectText(row(NS), new RegExp(`Console test ${NS}`), `the name of ${NS}`);
    check((await namespaceIds()).includes(NS), `the API does not list namespace ${NS}`);
    await shot('namespaces');
    return { namespace: NS };
  });

  await step('live-registration', async () => {
    await tid(`ns-services-${NS}`).click();
    await expectUrl(new RegExp(`#/services\\?namespaceId=${NS}$`), 'opening the services of the namespace');
    await expectVisible(tid('empty-state'), 'the empty services list');
    // Give the live stream a moment to connect (it falls back to polling otherwise).
    await page
      .locator('[data-testid="live-mode"][data-mode="live"], [data-testid="live-mode"][data-mode="polling"]')
      .first()
      .waitFor({ timeout: 5000 })
      .catch(() => {});
    const mode = await tid('live-mode').getAttribute('data-mode');
    await page.evaluate(() => {
      window.__consoleTestMarker = 'no-reload';
    });
    const t0 = Date.now();
    const reg = await api('POST', '/nacos/v1/ns/instance', {
      namespaceId: NS,
      serviceName: SVC,
      ip: '127.0.0.1',
      port: PORT,
      ephemeral: false,
    });
    check(reg.text.trim() === 'ok', `registering through the API answered ${reg.text}`);
    const link = tid(`svc-link-${GROUP}-${SVC}`);
    await expectVisible(link, `service ${SVC} in the open services page (no reload)`);
    const appearedMs = Date.now() - t0;
    const marker = await page.evaluate(() => window.__consoleTestMarker);
    check(marker === 'no-reload', 'the page was reloaded to show the new service');
    await expectText(tid(`svc-ips-${GROUP}-${SVC}`), '1', 'instance count of the service');
    await shot('services');

    await link.click();
    await expectUrl(new RegExp(`#/service/${NS}/${GROUP}/${SVC}$`), 'opening the service detail');
    await expectVisible(row(ADDR), `instance ${ADDR} in the detail page`);
    await expectText(tid(`inst-health-${ADDR}`), /Healthy/, `health of ${ADDR}`);
    await expectText(tid(`inst-enabled-${ADDR}`), 'Online', `status of ${ADDR}`);
    await shot('service-detail');
    return { liveMode: mode, appearedAfterMs: appearedMs };
  });

  await step('edit-weight', async () => {
    await tid(`inst-edit-${ADDR}`).click();
    const weight = tid('inst-form-weight');
    await expectVisible(weight, 'the edit-instance dialog');
    await weight.fill('3');
    await clickInDialog(tid('inst-form-submit'));
    await expectHidden(tid('inst-form-form'), 'the edit-instance dialog');
    await expectText(tid(`inst-weight-${ADDR}`), '3', `weight of ${ADDR} in the table`);
    const h = (await listHosts()).find((x) => x.ip === '127.0.0.1' && x.port === PORT);
    check(h, `the API does not list ${ADDR}`);
    check(h.weight === 3, `the API reports weight ${h.weight}, expected 3`);
    return { weight: h.weight };
  });

  await step('take-offline', async () => {
    await tid(`inst-toggle-${ADDR}`).click();
    await expectText(tid(`inst-enabled-${ADDR}`), 'Offline', `status of ${ADDR} after taking it offline`);
    const hosts = await listHosts();
    check(
      !hosts.some((x) => x.ip === '127.0.0.1' && x.port === PORT),
      `the API still returns ${ADDR} from /instance/list: ${JSON.stringify(hosts)}`,
    );
    return { listedHosts: hosts.length };
  });

  await step('language', async () => {
    await tid('lang-zh').click();
    await expectText(tid('nav-namespaces'), '命名空间', 'the namespaces menu item in Chinese');
    await expectText(tid('nav-services'), '服务列表', 'the services menu item in Chinese');
    await expectText(tid('nav-sync'), '同步任务', 'the sync tasks menu item in Chinese');
    await expectText(tid(`inst-enabled-${ADDR}`), '已下线', 'the instance status in Chinese');
    await expectText(tid('logout'), /退出登录/, 'the logout button in Chinese');
    await shot('service-detail-zh');
    await page.reload();
    await expectText(tid('nav-namespaces'), '命名空间', 'the namespaces menu item after a reload');
    const lang = await page.evaluate(() => localStorage.getItem('roster.console.lang'));
    check(lang === 'zh', `localStorage keeps language ${lang}`);
    // antd's own texts follow (ConfigProvider locale): the page-size changer
    await tid('nav-services').click();
    await expectUrl(new RegExp(`#/services\\?namespaceId=${NS}$`), 'the services menu (remembered namespace)');
    await expectVisible(tid(`svc-link-${GROUP}-${SVC}`), 'the service row');
    await expectText(page.locator('.ant-pagination-options'), /条\/页/, "antd's page-size changer in Chinese");
    await expectText(page.locator('thead'), /健康实例数/, 'the services table header in Chinese');
    await shot('services-zh');
    await tid('lang-en').click();
    await expectText(tid('nav-namespaces'), 'Namespaces', 'the namespaces menu item back in English');
    await expectText(page.locator('.ant-pagination-options'), /\/ page/, "antd's page-size changer back in English");
    return { remembered: lang };
  });

  await step('refuse-delete', async () => {
    await tid('nav-namespaces').click();
    await expectUrl(/#\/namespaces$/, 'the namespaces menu');
    await expectText(tid(`ns-service-count-${NS}`), '1', `service count of ${NS}`);
    await tid(`ns-delete-${NS}`).click();
    await expectVisible(tid('confirm-dialog'), 'the delete confirmation');
    await clickInDialog(tid('confirm-ok'));
    await expectVisible(tid('confirm-error'), 'the refusal message');
    const msg = ((await tid('confirm-error').textContent()) ?? '').trim();
    check(msg.includes(NS), `the refusal message does not name the namespace: ${JSON.stringify(msg)}`);
    await shot('namespace-delete-refused');
    await clickInDialog(tid('confirm-cancel'));
    await expectHidden(tid('confirm-dialog'), 'the delete confirmation');
    await expectVisible(row(NS), `namespace ${NS} row`);
    check((await namespaceIds()).includes(NS), `namespace ${NS} is gone from the API`);
    return { message: msg };
  });

  await step('delete-empty', async () => {
    await createNamespaceInUi(NS_EMPTY, `Console test ${NS_EMPTY}`);
    check((await namespaceIds()).includes(NS_EMPTY), `the API does not list ${NS_EMPTY}`);
    await tid(`ns-delete-${NS_EMPTY}`).click();
    await expectVisible(tid('confirm-dialog'), 'the delete confirmation');
    await clickInDialog(tid('confirm-ok'));
    await expectHidden(tid('confirm-dialog'), 'the delete confirmation');
    await expectHidden(row(NS_EMPTY), `the row of ${NS_EMPTY}`);
    check(!(await namespaceIds()).includes(NS_EMPTY), `namespace ${NS_EMPTY} still exists in the API`);
    return { deleted: NS_EMPTY };
  });

  await step('live-namespaces', async () => {
    await expectLive('the namespaces page');
    await markPage();
    const t0 = Date.now();
    await api('POST', '/nacos/v1/console/namespaces', {
      customNamespaceId: NS_API,
      namespaceName: `Made through the API ${NS_API}`,
      namespaceDesc: 'created through the HTTP API',
    });
    await expectVisible(row(NS_API), `namespace ${NS_API} created through the API, in the open page (no reload)`);
    const appearedMs = Date.now() - t0;
    await api('PUT', '/nacos/v1/console/namespaces', {
      namespace: NS_API,
      namespaceShowName: `Renamed through the API ${NS_API}`,
      namespaceDesc: '',
    });
    await expectText(row(NS_API), new RegExp(`Renamed through the API ${NS_API}`), `the new name of ${NS_API}`);
    await api('DELETE', '/nacos/v1/console/namespaces', { namespaceId: NS_API });
    await expectHidden(row(NS_API), `namespace ${NS_API} deleted through the API`);
    await expectNoReload('to follow namespace changes');
    return { appearedAfterMs: appearedMs };
  });

  await step('sync-tasks', async () => {
    await tid('nav-sync').click();
    await expectUrl(/#\/sync$/, 'the sync tasks menu');
    await expectVisible(tid('sync-table'), 'the sync tasks table');

    // A bad source URL: the server's 400 shows in the dialog, which stays open.
    await tid('sync-create').click();
    await expectVisible(tid('sync-form-name'), 'the new-sync-task dialog');
    await tid('sync-form-name').fill(TASK);
    await tid('sync-form-source').fill(BAD_SOURCE);
    await clickInDialog(tid('sync-form-submit'));
    await expectVisible(tid('sync-form-error'), "the server's refusal of a bad source URL");
    const refusal = ((await tid('sync-form-error').textContent()) ?? '').trim();
    check(/source/i.test(refusal), `the refusal does not name the source field: ${JSON.stringify(refusal)}`);
    check((await syncTask(TASK)) === null, `a task was created from ${BAD_SOURCE}`);
    await shot('sync-bad-source');
    await clickInDialog(tid('sync-form-cancel'));
    await expectHidden(tid('sync-form-form'), 'the new-sync-task dialog');

    // A good one, into NSID, filtered.
    await createTaskInUi(TASK, { namespace: NS, filter: FILTER });
    const created = await syncTask(TASK);
    check(created, `the API does not know sync task ${TASK}`);
    check(created.source.startsWith('etcd://127.0.0.1:1'), `the API shows source ${created.source}`);
    check(created.namespace === NS, `the API shows target namespace ${created.namespace}, expected ${NS}`);
    check((created.services ?? '').includes('helloworld*'), `the API shows service filter ${created.services}`);
    check(created.dryRun === false && created.paused === false, `the API shows dryRun ${created.dryRun}, paused ${created.paused}`);
    // The runner cannot reach the closed port; its reports reach the page as task events.
    await expectState(TASK, 'error', STATE_MS);
    await expectVisible(tid(`sync-error-${TASK}`), `the last error of ${TASK}`);
    await shot('sync');

    await tid(`sync-pause-${TASK}`).click();
    await expectVisible(tid(`sync-resume-${TASK}`), `the resume button of ${TASK}`);
    await expectState(TASK, 'paused');
    check((await syncTask(TASK)).paused === true, `the API does not show ${TASK} paused`);
    await tid(`sync-resume-${TASK}`).click();
    await expectVisible(tid(`sync-pause-${TASK}`), `the pause button of ${TASK}`);
    await expectState(TASK, '!paused');
    check((await syncTask(TASK)).paused === false, `the API still shows ${TASK} paused`);

    // A dry run is marked and has an expandable report.
    await createTaskInUi(TASK_DRY, { dryRun: true });
    await expectVisible(tid(`sync-dry-${TASK_DRY}`), `the dry-run mark of ${TASK_DRY}`);
    check((await syncTask(TASK_DRY))?.dryRun === true, `the API does not show ${TASK_DRY} as a dry run`);
    await row(TASK_DRY).locator('.ant-table-row-expand-icon').click();
    await expectVisible(tid(`sync-report-${TASK_DRY}`), `the dry-run report of ${TASK_DRY}`);

    await deleteTaskInUi(TASK_DRY, /imported nothing/);
    await deleteTaskInUi(TASK, /instances it imported are removed/);
    return { refusal, state: 'error' };
  });

  await step('live-sync', async () => {
    await expectLive('the sync tasks page');
    await markPage();
    const t0 = Date.now();
    await apiJson('POST', '/api/v1/sync/tasks', { name: TASK_API, source: SOURCE, paused: true });
    await expectVisible(row(TASK_API), `sync task ${TASK_API} created through the API, in the open page (no reload)`);
    const appearedMs = Date.now() - t0;
    await expectState(TASK_API, 'paused');
    // Resumed through the API: the runner's reports (it cannot reach the source) follow.
    await apiJson('POST', `${taskPath(TASK_API)}/resume`, {});
    await expectState(TASK_API, 'error', STATE_MS);
    await apiJson('POST', `${taskPath(TASK_API)}/pause`, {});
    await expectState(TASK_API, 'paused');
    await api('DELETE', taskPath(TASK_API));
    await expectHidden(row(TASK_API), `sync task ${TASK_API} deleted through the API`);
    await expectNoReload('to follow sync task changes');
    return { appearedAfterMs: appearedMs };
  });

  await step('cluster-and-users', async () => {
    await tid('nav-cluster').click();
    await expectUrl(/#\/cluster$/, 'the cluster menu');
    await expectVisible(page.locator('[data-testid="cluster-table"] tbody tr.ant-table-row'), 'a cluster member row');
    await expectText(page.locator('[data-testid^="member-live-"]'), /live/, 'the liveness of a member');
    const before = await tid('cluster-updated').textContent();
    await expectText(tid('cluster-updated'), new RegExp(`^(?!${before}$)`), 'the cluster page refreshing itself', 5000);
    await shot('cluster');
    await tid('nav-users').click();
    await expectUrl(/#\/users$/, 'the users menu');
    await expectVisible(row(args.username), `user ${args.username} in the users table`);
    await shot('users');
    return {};
  });

  await step('live-users', async () => {
    await expectLive('the users page');
    await markPage();
    const t0 = Date.now();
    await api('POST', '/nacos/v1/auth/users', { username: USER_API, password: 'made-through-the-api-1' });
    await expectVisible(row(USER_API), `user ${USER_API} created through the API, in the open page (no reload)`);
    const appearedMs = Date.now() - t0;
    await api('DELETE', '/nacos/v1/auth/users', { username: USER_API });
    await expectHidden(row(USER_API), `user ${USER_API} deleted through the API`);
    await expectNoReload('to follow user changes');
    return { appearedAfterMs: appearedMs };
  });

  await step('nav-refetch', async () => {
    // Each page, opened from the menu, then its menu item (or the brand link) clicked
    // again: the page asks for its data again. Before the click the page stays quiet
    // (nothing polls it), so the request is the click's.
    const QUIET_MS = 1000;
    const pages = [
      { nav: 'nav-namespaces', url: /#\/namespaces$/, data: '/nacos/v1/console/namespaces', shown: row('public') },
      { nav: 'brand', url: /#\/namespaces$/, data: '/nacos/v1/console/namespaces', shown: row('public') },
      { nav: 'nav-services', url: /#\/services\?/, data: '/nacos/v1/ns/catalog/services', shown: tid(`svc-link-${GROUP}-${SVC}`) },
      // every task was deleted: the empty state shows once the list is in
      { nav: 'nav-sync', url: /#\/sync$/, data: '/api/v1/sync/tasks', shown: tid('empty-state') },
      {
        nav: 'nav-cluster',
        url: /#\/cluster$/,
        data: '/api/v1/cluster',
        shown: page.locator('[data-testid="cluster-table"] tbody tr.ant-table-row'),
      },
      { nav: 'nav-users', url: /#\/users$/, data: '/nacos/v1/auth/users', shown: row(args.username) },
    ];
    await markPage();
    const counts = {};
    for (const p of pages) {
      const where = p.nav === 'brand' ? 'nav-namespaces' : p.nav;
      if (!p.url.test(page.url())) await tid(where).click();
      await expectUrl(p.url, `the page of ${p.nav}`);
      await expectVisible(p.shown, `the page of ${p.nav}`);
      if (p.nav === 'nav-cluster' && (await tid('cluster-auto').getAttribute('aria-checked')) === 'true') {
        // its own 2 s refresh would hide whether the click refetches
        await tid('cluster-auto').click();
      }
      const before = await requestsDuring(p.data, async () => {}, QUIET_MS);
      check(before === 0, `the page of ${p.nav} fetched ${p.data} ${before} times without being asked`);
      const url = page.url();
      const after = await requestsDuring(p.data, () => tid(p.nav).click(), QUIET_MS);
      check(after >= 1, `clicking ${p.nav} on its own page did not fetch ${p.data}`);
      check(page.url() === url, `clicking ${p.nav} on its own page moved to ${page.url()}`);
      await expectVisible(p.shown, `the page of ${p.nav} after the refetch`);
      counts[p.nav] = after;
    }
    await expectNoReload('by a navigation click');
    return { requests: counts };
  });

  emit({ step: 'done', ok: true, totalMs: Date.now() - started, shots: path.resolve(args.shots) });
}

async function fail(e) {
  if (watchdogFired) return 3;
  const isCheck = e instanceof CheckFailed;
  const reason = e instanceof Error ? e.message.split('\n')[0] : String(e);
  console.error(`FAIL ${currentStep}: ${reason}`);
  if (!isCheck && e instanceof Error && e.stack) console.error(e.stack);
  let shotFile = null;
  if (page) {
    console.error(`page: ${page.url()}`);
    try {
      shotFile = await shot(`failure-${currentStep}`);
      console.error(`screenshot: ${shotFile}`);
    } catch {
      /* the page may be gone */
    }
  }
  emit({ step: currentStep, ok: false, error: reason, url: page?.url() ?? null, screenshot: shotFile });
  return isCheck ? 1 : 2;
}

let code = 0;
try {
  await main();
} catch (e) {
  code = await fail(e);
}
try {
  await Promise.race([browser?.close(), new Promise((r) => setTimeout(r, 5000))]);
} catch {
  /* closing anyway */
}
clearTimeout(watchdog);
process.exit(watchdogFired ? 3 : code);
