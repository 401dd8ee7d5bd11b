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
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { axeProblems, fitProblems } from './checks.mjs';

// ------------------------------------------------------------------ arguments

function parseArgs(argv) {
  const out = {
    server: '127.0.0.1:8848',
    username: 'nacos',
    password: process.env.ROSTER_PASSWORD ?? '',
    namespace: 'console-test',
    service: 'console-svc',
    shots: 'console-shots',
    watchdog: 240,
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
// Access control: a user who may write NSID and read NSID-ro, through one role.
const NS_RO = `${NS}-ro`;
const RBAC_USER = `${NS}-ann`;
const RBAC_PASSWORD = 'console-ann-pass-1';
const ROLE = `${NS}-role`;
// A role no user holds: granting it a permission is refused (404).
const ROLE_UNHELD = `${NS}-nobody`;
const SVC_RO = `${args.service}-ro`;
const SVC_USER = `${args.service}-by-user`;
const SVC = args.service;
// A service whose one instance is unhealthy (127.0.0.1:1, a closed port), for the
// services page's "unhealthy instances" filter.
const SVC_SICK = `${args.service}-sick`;
// The clients page: an ephemeral instance of it registered over v1 HTTP (an address
// client), and a v1 UDP subscriber of it, both at CLIENT_IP.
const SVC_CLIENTS = `${args.service}-clients`;
const CLIENT_IP = '127.0.0.3';
const CLIENT_APP = `${args.namespace}-app`;
const GROUP = 'DEFAULT_GROUP';
const PORT = Number(args.server.split(':').pop());
// The layout step's service with one instance from each of three faces (roster started
// with --eureka-namespace and --consul-namespace NSID): Nacos v1 HTTP, Eureka and Consul,
// as [ip, the face's name in `registeredBy`, the console's label].
const SVC_FACES = `${args.service}-faces`;
const FACES = [
  ['127.0.0.5', 'http', 'HTTP'],
  ['127.0.0.6', 'eureka', 'Eureka'],
  ['127.0.0.7', 'consul', 'Consul'],
];
const ADDR = `127.0.0.1:${PORT}`;
// Sync tasks: the source is a closed loopback port, so the runner reports "error".
const TASK = `${NS}-sync`;
const TASK_DRY = `${NS}-dry`;
const SOURCE = 'etcd://127.0.0.1:1?layout=go-micro';
const BAD_SOURCE = 'nosuch://127.0.0.1:1';
const FILTER = 'helloworld*,!*-canary';
// Configurations: an item of NSID, created, edited, rolled back, edited while the API
// changes it, and deleted in the UI.
const CFG = `${NS}-app.yaml`;
const CFG_KEY = `${GROUP}/${CFG}`;
const CFG_V1 = 'server:\n  port: 8080\nfeature:\n  search: false\n';
const CFG_V2 = 'server:\n  port: 9090\nfeature:\n  search: false\n  cart: true\n';
const CFG_API = 'server:\n  port: 7070\nfeature:\n  search: false\n';
const CFG_V3 = 'server:\n  port: 6060\nfeature:\n  search: true\n';
// Gray releases: an item of NSID given a tag version and a beta for 127.0.0.1 (where
// this script reads from) in the UI, read back as clients read them, then the tag
// version removed, the beta promoted, another beta stopped, in the UI.
const CFG_GRAY = `${NS}-gray.properties`;
const CFG_GRAY_KEY = `${GROUP}/${CFG_GRAY}`;
const GRAY_FORMAL = 'timeout=30\nretries=3\n';
const GRAY_TAG = 'timeout=20\nretries=3\n';
const GRAY_BETA = 'timeout=10\nretries=3\nfast=true\n';
// The user agents of the long polls the listeners dialog lists.
const POLL_AGENTS = ['console-test-poll-1', 'console-test-poll-2'];
const STATE_MS = 30_000;
/** The screen the console has to fit, every action visible: a common laptop's. */
const VIEWPORT = { width: 1366, height: 768 };
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

async function shot(name, { fits = true, a11y = true } = {}) {
  // every picture of the console is also a check that it fits the screen, and that axe
  // finds nothing serious in it
  if (fits) await expectFits(`the page of screenshot ${name}`);
  if (a11y) await expectAccessible(`the page of screenshot ${name}`);
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

/** The permissions of `role`, as the API lists them. */
async function permissionsOf(role) {
  const r = await api('GET', '/nacos/v1/auth/permissions', { role, pageNo: 1, pageSize: 100 });
  return r.json?.pageItems ?? [];
}

/** The users holding `role`. */
async function holdersOf(role) {
  const r = await api('GET', '/nacos/v1/auth/roles', { role, pageNo: 1, pageSize: 100 });
  return (r.json?.pageItems ?? []).map((b) => b.username);
}

/** Removes NSID-ro with the instance and service registered in it. */
async function removeReadOnlyNamespace() {
  await api('DELETE', '/nacos/v1/ns/instance', { namespaceId: NS_RO, serviceName: SVC_RO, ip: '127.0.0.1', port: PORT, ephemeral: false }, { allowError: true });
  await api('DELETE', '/nacos/v1/ns/service', { namespaceId: NS_RO, serviceName: SVC_RO, groupName: GROUP }, { allowError: true });
  const d = await api('DELETE', '/nacos/v1/console/namespaces', { namespaceId: NS_RO }, { allowError: true });
  check(d.status === 200, `namespace ${NS_RO} cannot be removed: ${d.text}`);
}

/** Registers SVC_FACES's instances, one through each face of FACES, on PORT. */
async function registerFaceInstances() {
  const [[httpIp], [eurekaIp], [consulIp]] = FACES;
  // ephemeral, like the other two; kept for ten minutes without beats
  const keep = { 'preserved.heart.beat.timeout': '600000', 'preserved.ip.delete.timeout': '600000' };
  await api('POST', '/nacos/v1/ns/instance', {
    namespaceId: NS, serviceName: SVC_FACES, ip: httpIp, port: PORT, ephemeral: true, metadata: JSON.stringify(keep),
  });
  const app = SVC_FACES.toUpperCase();
  const eureka = { instance: {
    instanceId: `${eurekaIp}:${SVC_FACES}:${PORT}`, app, ipAddr: eurekaIp, hostName: eurekaIp, status: 'UP',
    port: { $: PORT, '@enabled': 'true' }, vipAddress: SVC_FACES,
    dataCenterInfo: { '@class': 'com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo', name: 'MyOwn' },
    leaseInfo: { renewalIntervalInSecs: 30, durationInSecs: 600 },
  } };
  // (answered 204, no body)
  await rawJson('POST', `/eureka/apps/${app}`, eureka, { Authorization: `Bearer ${apiToken}` });
  const consul = { Name: SVC_FACES, ID: `${SVC_FACES}-1`, Address: consulIp, Port: PORT, Check: { TTL: '10m' } };
  await rawJson('PUT', '/v1/agent/service/register', consul, { 'X-Consul-Token': apiToken });
}

/** Removes SVC_FACES's instances (each through the Nacos API) and the service. */
async function removeFaceInstances() {
  const left = await api('GET', '/nacos/v1/ns/catalog/instances', { namespaceId: NS, serviceName: SVC_FACES, clusterName: 'DEFAULT', pageSize: 100 }, { allowError: true });
  for (const h of left.json?.list ?? []) {
    await api('DELETE', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC_FACES, ip: h.ip, port: h.port, ephemeral: h.ephemeral }, { allowError: true });
  }
  await api('DELETE', '/nacos/v1/ns/service', { namespaceId: NS, serviceName: SVC_FACES, groupName: GROUP }, { allowError: true });
}

/** A JSON request with `headers` (and no other credentials); the answer's text. */
async function rawJson(method, p, body, headers) {
  let res;
  try {
    res = await fetch(BASE + p, {
      method,
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(ACTION_MS),
    });
  } catch (e) {
    throw new Error(`${method} ${p}: ${e?.cause?.message ?? e?.message ?? e}`);
  }
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p} -> ${res.status}: ${text}`);
  return text;
}

/** A request as `username`, with a token of its own (the admin's stays in place). */
async function apiAs(username, password, method, p, params) {
  const saved = apiToken;
  try {
    apiToken = null;
    const l = await api('POST', '/nacos/v1/auth/login', { username, password });
    apiToken = l.json.accessToken;
    return await api(method, p, params, { allowError: true });
  } finally {
    apiToken = saved;
  }
}

/** The task as the API shows it, or null when there is none. */
async function syncTask(name) {
  const r = await api('GET', taskPath(name), {}, { allowError: true });
  if (r.status === 404) return null;
  check(r.status === 200, `GET ${taskPath(name)} answered ${r.status}: ${r.text}`);
  return r.json;
}

/** The configuration item CFG of NSID as `show=all` gives it, or null when there is none. */
async function storedConfig() {
  const r = await api('GET', '/nacos/v1/cs/configs', { dataId: CFG, group: GROUP, tenant: NS, show: 'all' }, { allowError: true });
  if (r.status === 404) return null;
  check(r.status === 200 && r.json, `GET the configuration ${CFG} answered ${r.status}: ${r.text}`);
  return r.json;
}

/**
 * Starts a long poll on CFG of NSID holding `md5` (Nacos' v1 HTTP listener, as a Java or
 * Python client sends it) as `agent`; the server holds it for up to 20 s. Resolves to a
 * handle whose `end()` aborts it and waits for it to finish.
 */
function holdLongPoll(md5, agent) {
  const aborter = new AbortController();
  const body = new URLSearchParams({ 'Listening-Configs': `${CFG}\x02${GROUP}\x02${md5}\x02${NS}\x01` });
  const done = fetch(`${BASE}/nacos/v1/cs/configs/listener?accessToken=${encodeURIComponent(apiToken)}`, {
    method: 'POST',
    headers: { 'Long-Pulling-Timeout': '20000', 'User-Agent': agent },
    body,
    signal: aborter.signal,
  })
    .then((r) => r.text())
    .catch(() => null);
  return {
    end: async () => {
      aborter.abort();
      await done;
    },
  };
}

/** CFG_GRAY of NSID as a client at 127.0.0.1 reads it (`params`: a `tag`, `show=all`). */
async function grayRead(params = {}) {
  return api('GET', '/nacos/v1/cs/configs', { dataId: CFG_GRAY, group: GROUP, tenant: NS, ...params }, { allowError: true });
}

/** Checks that a client at 127.0.0.1 reading CFG_GRAY (with `params`) gets `content`. */
async function expectGrayRead(params, content, what) {
  const r = await grayRead(params);
  check(r.status === 200 && r.text === content, `${what}: a client reading ${JSON.stringify(params)} gets ${r.status} ${JSON.stringify(r.text)}, expected ${JSON.stringify(content)}`);
}

/** The beta of CFG_GRAY as `beta=true` answers it (`data`), or null. */
async function grayBeta() {
  const r = await api('GET', '/nacos/v1/cs/configs', { dataId: CFG_GRAY, group: GROUP, tenant: NS, beta: true });
  check(r.json?.code === 200 && r.json.message === 'query beta ok', `beta=true answered ${r.text}`);
  return r.json.data ?? null;
}

/** The history of CFG_GRAY through the API, newest first: `op` and gray name. */
async function grayHistory() {
  const r = await api('GET', '/nacos/v1/cs/history', { search: 'accurate', dataId: CFG_GRAY, group: GROUP, tenant: NS, pageNo: 1, pageSize: 100 });
  return (r.json?.pageItems ?? []).map((v) => `${v.opType}${v.publishType === 'gray' ? ' ' + v.grayName : ''}`);
}

/** Opens the editor of CFG_GRAY on its gray release tab (the list page is shown). */
async function openGrayTab() {
  await tid(`cfg-edit-${CFG_GRAY_KEY}`).click();
  await expectVisible(tid('cfg-tab-gray'), `the tabs of the editor of ${CFG_GRAY}`);
  await clickInDialog(tid('cfg-tab-gray'));
  await expectVisible(page.locator('[data-testid="cfg-gray"][data-pane="list"][data-count]'), `the gray versions of ${CFG_GRAY}`);
}

/** Submits the open gray publication form; resolves to the message under a field, the
 *  refusal shown, or null once the list shows again. */
async function submitGrayForm() {
  await clickInDialog(tid('cfg-gray-form-submit'));
  const explain = page.locator('[data-testid="cfg-gray-form"] .ant-form-item-explain-error');
  const outcome = await Promise.race([
    page
      .locator('[data-testid="cfg-gray"][data-pane="list"]')
      .waitFor({ state: 'visible', timeout: ACTION_MS })
      .then(() => 'list')
      .catch(() => 'timeout'),
    explain
      .first()
      .waitFor({ state: 'visible', timeout: ACTION_MS })
      .then(() => 'field')
      .catch(() => 'timeout'),
    tid('cfg-gray-error')
      .waitFor({ state: 'visible', timeout: ACTION_MS })
      .then(() => 'error')
      .catch(() => 'timeout'),
  ]);
  check(outcome !== 'timeout', 'the gray publication neither went through nor showed why not');
  if (outcome === 'field') return ((await explain.first().textContent()) ?? '').trim();
  if (outcome === 'error') return ((await tid('cfg-gray-error').textContent()) ?? '').trim();
  return null;
}

/** The versions the history dialog lists, top down: op, gray name, current mark. */
async function historyGrayRows() {
  return page.locator('[data-testid="cfg-history-table"] tbody tr.ant-table-row').evaluateAll((rows) =>
    rows.map((r) => {
      const op = r.querySelector('[data-testid="cfg-op"]')?.getAttribute('data-op');
      const gray = r.querySelector('[data-testid="cfg-history-gray"]')?.getAttribute('data-gray');
      const current = r.querySelector('[data-testid="cfg-history-current"]') ? ' current' : '';
      return `${op}${gray ? ' ' + gray : ''}${current}`;
    }),
  );
}

/** The clients listening to CFG of NSID, as the listener query lists them. */
async function listenerClients() {
  const r = await api('GET', '/nacos/v1/cs/configs/listener', { dataId: CFG, group: GROUP, tenant: NS });
  return (r.json?.listeners ?? []).map((l) => l.client);
}

/** Waits until the listener query lists every one of `agents`. */
async function expectListening(agents) {
  const deadline = Date.now() + ACTION_MS;
  let clients = [];
  while (Date.now() < deadline) {
    clients = await listenerClients();
    if (agents.every((a) => clients.includes(a))) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new CheckFailed(`the listener query lists ${JSON.stringify(clients)}, expected ${JSON.stringify(agents)}`);
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
/** Picks `user` in the bind-role dialog's user select: types it, clicks its option, and
 *  waits until the select shows it chosen. The options come from a user search; on a
 *  loaded machine its answer can re-render them after the click, and a form submitted
 *  then says no user is chosen ("请选择用户"), which once failed the layout step. */
async function pickRoleUser(user) {
  await clickInDialog(tid('role-form-user'));
  await page.keyboard.type(user);
  const chosen = page.locator('[data-testid="role-form-user"] .ant-select-selection-item').filter({ hasText: user });
  for (let attempt = 0; attempt < 3; attempt++) {
    await tid(`role-form-user-option-${user}`).click();
    try {
      await chosen.waitFor({ state: 'visible', timeout: ACTION_MS / 3 });
      return;
    } catch {
      // The search answered after the click: open the select and pick again.
      if (!(await tid(`role-form-user-option-${user}`).isVisible())) {
        await clickInDialog(tid('role-form-user'));
        await page.keyboard.type(user);
      }
    }
  }
  check(false, `the user select does not show ${user} chosen`);
}

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

/** Logs in through the form (the page is on the login page). */
async function loginInUi(username, password) {
  await expectVisible(tid('login-username'), 'the login form');
  await tid('login-username').fill(username);
  await tid('login-password').fill(password);
  await tid('login-submit').click();
  // the overview is the landing page; the steps after a login start on the namespaces
  await expectUrl(/#\/overview$/, `after logging in as ${username}`);
  await expectText(tid('current-user'), new RegExp(username), 'the user name in the header');
  await tid('nav-namespaces').click();
  await expectUrl(/#\/namespaces$/, `the namespaces page of ${username}`);
}

async function logoutInUi() {
  await tid('logout').click();
  await expectUrl(/#\/login$/, 'after logging out');
}

/** Submits the open form `testid`; resolves to the server's refusal, or null when the
 *  dialog closed. */
async function submitForm(testid) {
  await clickInDialog(tid(`${testid}-submit`));
  const err = tid(`${testid}-error`);
  const outcome = await Promise.race([
    tid(`${testid}-form`)
      .waitFor({ state: 'hidden', timeout: ACTION_MS })
      .then(() => 'closed')
      .catch(() => 'timeout'),
    err
      .waitFor({ state: 'visible', timeout: ACTION_MS })
      .then(() => 'error')
      .catch(() => 'timeout'),
  ]);
  check(outcome !== 'timeout', `the ${testid} dialog neither closed nor showed an error`);
  return outcome === 'error' ? ((await err.textContent()) ?? '').trim() : null;
}

/** Opens the grant dialog and fills it: `role` (left as prefilled when absent), a
 *  namespace or a resource pattern, an action. Resolves to the refusal, or null. */
async function grantInUi({ role, namespace, pattern, action, shotName }) {
  await tid('perm-create').click();
  await expectVisible(tid('perm-form-role'), 'the grant dialog');
  if (role !== undefined) await tid('perm-form-role').fill(role);
  if (pattern) {
    await clickInDialog(tid('perm-form-scope-pattern'));
    await tid('perm-form-resource').fill(pattern);
  } else {
    await clickInDialog(tid('perm-form-namespace'));
    await page.keyboard.type(namespace);
    await tid(`perm-ns-option-${namespace}`).click();
  }
  await tid(`perm-form-action-${action}`).click();
  const resource = pattern ?? `${namespace}:*:*`;
  await expectText(tid('perm-form-preview'), new RegExp(resource.replace(/[*]/g, '\\*')), 'the grant preview');
  if (shotName) await shot(shotName);
  return submitForm('perm-form');
}

/** Confirms the open confirmation dialog; resolves to the refusal, or null. */
async function confirmInUi(what) {
  await expectVisible(tid('confirm-dialog'), what);
  await clickInDialog(tid('confirm-ok'));
  const outcome = await Promise.race([
    tid('confirm-dialog')
      .waitFor({ state: 'hidden', timeout: ACTION_MS })
      .then(() => 'closed')
      .catch(() => 'timeout'),
    tid('confirm-error')
      .waitFor({ state: 'visible', timeout: ACTION_MS })
      .then(() => 'error')
      .catch(() => 'timeout'),
  ]);
  check(outcome !== 'timeout', `${what}: the dialog neither closed nor showed an error`);
  return outcome === 'error' ? ((await tid('confirm-error').textContent()) ?? '').trim() : null;
}

/**
 * Checks that the page fits the viewport's width with every action visible: nothing
 * scrolls sideways (the page, a table), and each visible button outside a dialog lies
 * inside the viewport, is not cut by a container that hides overflow, is not cut to
 * part of its label, and is not covered by something else (a long tag spilling over).
 */
async function expectFits(what) {
  const problems = await fitProblems(page);
  check(problems.length === 0, `${what} does not fit ${VIEWPORT.width} × ${VIEWPORT.height}: ${problems.join('; ')}`);
}

/** Fails on any axe-core violation of impact serious or critical (`checks.mjs`). */
async function expectAccessible(what) {
  const problems = await axeProblems(page, { timeout: ACTION_MS });
  check(problems.length === 0, `${what} has accessibility violations: ${problems.join(' | ')}`);
}

/** A TCP listener on a free loopback port that closes what connects (a TCP health check
 *  finds it up). Resolves to its port and a `close()`. */
function listenLoopback() {
  return new Promise((resolve, reject) => {
    const server = net.createServer((socket) => socket.destroy());
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () =>
      resolve({ port: server.address().port, close: () => new Promise((r) => server.close(() => r())) }),
    );
  });
}

/** Goes to a page by its address and waits for what shows it is there. */
async function visit(hash, shown, what) {
  await page.evaluate((h) => {
    window.location.hash = h;
  }, hash);
  await expectVisible(shown, what);
  // tables fill in, fonts settle
  await page.waitForFunction(() => !document.querySelector('.ant-spin-spinning, .ant-skeleton-active'), null, { timeout: ACTION_MS });
}

/** The rows of the audit table: action, resource, status, and the status tag's colour. */
async function auditRows() {
  return page.locator('[data-testid="audit-table"] tbody tr.ant-table-row').evaluateAll((rows) =>
    rows.map((r) => {
      const tag = r.querySelector('[data-testid="audit-status"]');
      return {
        action: r.querySelector('[data-testid="audit-action"]')?.textContent ?? '',
        resource: r.querySelector('[data-testid="audit-resource"]')?.textContent ?? '',
        status: Number(tag?.getAttribute('data-status')),
        colors: [...(tag?.className ?? '').matchAll(/ant-tag-(\w+)/g)].map((m) => m[1]),
      };
    }),
  );
}

/** The lines of the diff `testid` shows as added and as removed (each line's text). */
async function diffLinesOf(testid) {
  const lines = (kind) =>
    page.locator(`[data-testid="${testid}"] [data-kind="${kind}"] .diff-text`).allTextContents();
  return { added: await lines('add'), removed: await lines('del') };
}

/** The background colour of the first `kind` line of diff `testid`, as the page draws it. */
async function diffColour(testid, kind) {
  return page
    .locator(`[data-testid="${testid}"] [data-kind="${kind}"]`)
    .first()
    .evaluate((el) => getComputedStyle(el).backgroundColor);
}

/** The operations of the versions the history dialog lists, top down, and their ids. */
async function historyRows() {
  return page.locator('[data-testid="cfg-history-table"] tbody tr.ant-table-row').evaluateAll((rows) =>
    rows.map((r) => ({ id: r.getAttribute('data-row-key'), op: r.querySelector('[data-testid="cfg-op"]')?.getAttribute('data-op') })),
  );
}

/** The rows of the listeners dialog: protocol, client, whether current, the tag's colours. */
async function listenerRows() {
  return page.locator('[data-testid="cfg-listeners-table"] tbody tr.ant-table-row').evaluateAll((rows) =>
    rows.map((r) => {
      const state = r.querySelector('[data-testid="cfg-listener-state"]');
      return {
        protocol: r.querySelector('[data-testid="cfg-listener-protocol"]')?.getAttribute('data-protocol'),
        client: r.querySelector('[data-testid="cfg-listener-client"]')?.textContent,
        current: state?.getAttribute('data-current'),
        colors: [...(state?.className ?? '').matchAll(/ant-tag-(\w+)/g)].map((m) => m[1]),
      };
    }),
  );
}

/** Clicks `button` and resolves to the download it starts: its bytes, name and request URL. */
async function downloadThrough(button) {
  const [download, request] = await Promise.all([
    page.waitForEvent('download', { timeout: ACTION_MS }),
    page.waitForRequest((r) => new URL(r.url()).searchParams.get('exportV2') === 'true', { timeout: ACTION_MS }),
    button.click(),
  ]);
  const file = await download.path();
  return { bytes: fs.readFileSync(file), name: download.suggestedFilename(), url: new URL(request.url()) };
}

/** Waits until the content field of the open editor holds `content` (it loads the stored item). */
async function expectEditorContent(content, what) {
  const field = tid('cfg-form-content');
  await expectVisible(field, what);
  const deadline = Date.now() + ACTION_MS;
  let seen = null;
  while (Date.now() < deadline) {
    seen = await field.inputValue().catch(() => null);
    if (seen === content) return;
    await page.waitForTimeout(100);
  }
  throw new CheckFailed(`${what}: the editor holds ${JSON.stringify(seen)}, expected ${JSON.stringify(content)}`);
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
    if (ids.includes(NS) && (await storedConfig())) {
      await api('DELETE', '/nacos/v1/cs/configs', { dataId: CFG, group: GROUP, tenant: NS });
      removed.push(`configuration ${CFG}`);
    }
    if (ids.includes(NS) && (await grayRead()).status === 200) {
      await api('DELETE', '/nacos/v1/cs/configs', { dataId: CFG_GRAY, group: GROUP, tenant: NS });
      removed.push(`configuration ${CFG_GRAY}`);
    }
    if (ids.includes(NS)) {
      const r = await api('GET', '/nacos/v1/ns/instance/list', { namespaceId: NS, serviceName: SVC }, { allowError: true });
      if (r.status === 200 || r.status === 404) {
        await api('DELETE', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC, ip: '127.0.0.1', port: PORT, ephemeral: false }, { allowError: true });
        // service-tools' extra instances, on the ports its listeners had
        const left = await api('GET', '/nacos/v1/ns/catalog/instances', { namespaceId: NS, serviceName: SVC, clusterName: 'DEFAULT', pageSize: 100 }, { allowError: true });
        for (const h of left.json?.list ?? []) {
          await api('DELETE', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC, ip: h.ip, port: h.port, ephemeral: h.ephemeral }, { allowError: true });
        }
        await api('DELETE', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC_SICK, ip: '127.0.0.1', port: 1, ephemeral: false }, { allowError: true });
        await api('DELETE', '/nacos/v1/ns/service', { namespaceId: NS, serviceName: SVC_SICK, groupName: GROUP }, { allowError: true });
        await api('DELETE', '/nacos/v1/ns/service', { namespaceId: NS, serviceName: SVC, groupName: GROUP }, { allowError: true });
        await api('DELETE', '/nacos/v1/ns/service', { namespaceId: NS, serviceName: SVC_USER, groupName: GROUP }, { allowError: true });
        await removeFaceInstances();
      }
      const d = await api('DELETE', '/nacos/v1/console/namespaces', { namespaceId: NS }, { allowError: true });
      check(d.status === 200, `namespace ${NS} exists from an earlier run and cannot be removed: ${d.text}`);
      removed.push(NS);
    }
    if (ids.includes(NS_RO)) {
      await removeReadOnlyNamespace();
      removed.push(NS_RO);
    }
    for (const id of [NS_EMPTY, NS_API]) {
      if (!ids.includes(id)) continue;
      await api('DELETE', '/nacos/v1/console/namespaces', { namespaceId: id }, { allowError: true });
      removed.push(id);
    }
    const u = await api('DELETE', '/nacos/v1/auth/users', { username: USER_API }, { allowError: true });
    if (u.status === 200) removed.push(`user ${USER_API}`);
    // access control: permissions outlive their role's last holder, so they go first
    for (const role of [ROLE, ROLE_UNHELD]) {
      for (const p of await permissionsOf(role)) {
        await api('DELETE', '/nacos/v1/auth/permissions', p, { allowError: true });
        removed.push(`permission ${p.action} ${p.resource} of ${role}`);
      }
    }
    const r = await api('DELETE', '/nacos/v1/auth/roles', { role: ROLE }, { allowError: true });
    if (r.status === 200) removed.push(`role ${ROLE}`);
    const a = await api('DELETE', '/nacos/v1/auth/users', { username: RBAC_USER }, { allowError: true });
    if (a.status === 200) removed.push(`user ${RBAC_USER}`);
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
    const context = await browser.newContext({ viewport: VIEWPORT, locale: 'en-US' });
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
    await expectText(tid('login-first-password'), /initial-admin-password.*ROSTER_ADMIN_PASSWORD/, 'where the first password is');
    await expectFits('the login page');
    await shot('login');
    await tid('login-username').fill(args.username);
    await tid('login-password').fill(args.password);
    await tid('login-submit').click();
    await expectUrl(/#\/overview$/, 'after logging in (the overview is the landing page)');
    await expectVisible(tid('overview-page'), 'the overview page');
    await expectVisible(tid('nav-namespaces'), 'the navigation menu');
    await tid('nav-namespaces').click();
    await expectUrl(/#\/namespaces$/, 'the namespaces menu item');
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

  await step('service-tools', async () => {
    // Two more instances of NAME with metadata, healthy: this script listens on their ports.
    const listeners = [await listenLoopback(), await listenLoopback()];
    const extra = [
      { key: `127.0.0.1:${listeners[0].port}`, port: listeners[0].port, metadata: 'env=prod,zone=a' },
      { key: `127.0.0.1:${listeners[1].port}`, port: listeners[1].port, metadata: 'env=test,canary=1' },
    ];
    const out = {};
    try {
      for (const x of extra) {
        await api('POST', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC, ip: '127.0.0.1', port: x.port, ephemeral: false, metadata: x.metadata });
      }
      for (const x of extra) await expectVisible(row(x.key), `instance ${x.key} in the detail page`);

      // Sample code: each tab names this server, the service, its group and namespace.
      const [host, port] = [args.server.slice(0, args.server.lastIndexOf(':')), PORT];
      const sampleTabs = ['java', 'spring', 'go', 'python', 'node'];
      await tid('sample-code').click();
      await expectVisible(tid('sample-dialog'), 'the sample-code dialog');
      for (const key of sampleTabs) {
        await clickInDialog(tid(`sample-tab-${key}`));
        const code = tid(`sample-code-${key}`);
        await expectVisible(code, `the ${key} sample`);
        const text = (await code.textContent()) ?? '';
        const server = key === 'go' ? [`"${host}"`, `, ${port})`] : [`"${args.server}"`];
        for (const want of [`"${SVC}"`, `"${GROUP}"`, `"${NS}"`, ...server]) {
          check(text.includes(want), `the ${key} sample does not contain ${want}: ${text.slice(0, 400)}`);
        }
        check(await tid(`sample-copy-${key}`).isVisible(), `the ${key} sample has no copy button`);
      }
      await clickInDialog(tid('sample-tab-java'));
      await shot('service-sample-code');
      await page.keyboard.press('Escape');
      await expectHidden(tid('sample-dialog'), 'the sample-code dialog');
      await tid('lang-zh').click();
      await expectText(tid('sample-code'), /示例代码/, 'the sample-code button in Chinese');
      await tid('sample-code').click();
      await expectVisible(tid('sample-dialog'), 'the sample-code dialog in Chinese');
      await expectText(page.locator('.ant-modal-title'), new RegExp(`${SVC} 的示例代码`), 'the sample-code title in Chinese');
      await shot('service-sample-code-zh');
      await page.keyboard.press('Escape');
      await expectHidden(tid('sample-dialog'), 'the sample-code dialog');
      await tid('lang-en').click();
      await expectText(tid('sample-code'), /Sample code/, 'the sample-code button back in English');

      // The metadata filter, applied by the server.
      const shown = async (keys, hidden, what) => {
        for (const k of keys) await expectVisible(row(k), `${k} ${what}`);
        for (const k of hidden) await expectHidden(row(k), `${k} ${what}`);
      };
      const all = [ADDR, extra[0].key, extra[1].key];
      await tid('inst-selector').fill('env=prod');
      await shown([extra[0].key], [ADDR, extra[1].key], 'with selector env=prod');
      await tid('inst-selector').fill('!canary');
      await shown([ADDR, extra[0].key], [extra[1].key], 'with selector !canary');
      await tid('inst-selector').fill('env in (');
      await expectText(tid('inst-selector-error'), /Param 'selector' is illegal/, 'the parse error under the filter');
      check((await page.locator('.ant-alert-error').count()) === 0, 'the parse error shows as a page error too');
      // the tables keep the last filter that parsed
      await shown([ADDR, extra[0].key], [extra[1].key], 'while the filter does not parse');
      await page.mouse.move(0, VIEWPORT.height - 1);
      await shot('service-metadata-filter');
      await tid('inst-selector').fill('');
      await expectHidden(tid('inst-selector-error'), 'the parse error of an emptied filter');
      await shown(all, [], 'with the filter emptied');

      // Batch take-offline / bring-online of the two extra instances.
      const tick = async (key) => row(key).locator('input[type="checkbox"]').check();
      const listed = async () => new Set((await listHosts()).map((h) => `${h.ip}:${h.port}`));
      for (const x of extra) await tick(x.key);
      await expectText(tid('batch-offline-DEFAULT'), /Take offline \(2\)/, 'the batch take-offline button');
      await page.mouse.move(0, VIEWPORT.height - 1);
      await shot('service-batch');
      await tid('batch-offline-DEFAULT').click();
      await expectText(tid('confirm-dialog'), new RegExp(extra[1].key), 'the batch confirmation naming the instances');
      check((await confirmInUi('taking two instances offline')) === null, 'the batch take-offline was refused');
      for (const x of extra) await expectText(tid(`inst-enabled-${x.key}`), 'Offline', `status of ${x.key} after the batch`);
      await expectText(tid('batch-offline-DEFAULT'), /\(0\)/, 'the selection after the batch');
      let hosts = await listed();
      check(extra.every((x) => !hosts.has(x.key)), `/instance/list still returns the batch: ${[...hosts]}`);
      for (const x of extra) await tick(x.key);
      await tid('batch-online-DEFAULT').click();
      check((await confirmInUi('bringing two instances online')) === null, 'the batch bring-online was refused');
      for (const x of extra) await expectText(tid(`inst-enabled-${x.key}`), 'Online', `status of ${x.key} after the batch`);
      hosts = await listed();
      check(extra.every((x) => hosts.has(x.key)), `/instance/list does not return the batch: ${[...hosts]}`);
      check(!hosts.has(ADDR), `${ADDR} (offline, not selected) came back online`);
      out.batch = extra.map((x) => x.key);
    } finally {
      for (const x of extra) {
        await api('DELETE', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC, ip: '127.0.0.1', port: x.port, ephemeral: false }, { allowError: true });
      }
      for (const l of listeners) await l.close();
    }

    // The services page's "unhealthy instances" filter (the server's unhealthyOnly).
    await api('POST', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC_SICK, ip: '127.0.0.1', port: 1, ephemeral: false, healthy: false });
    try {
      await visit(`#/services?namespaceId=${NS}`, tid(`svc-link-${GROUP}-${SVC_SICK}`), 'the services page');
      await tid('svc-unhealthy-only').click();
      await expectHidden(tid(`svc-link-${GROUP}-${SVC}`), `the all-healthy ${SVC} with the unhealthy filter`);
      await expectVisible(tid(`svc-link-${GROUP}-${SVC_SICK}`), `${SVC_SICK} with the unhealthy filter`);
      await tid('svc-unhealthy-only').click();
      await expectVisible(tid(`svc-link-${GROUP}-${SVC}`), `${SVC} with the unhealthy filter off`);
    } finally {
      await api('DELETE', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC_SICK, ip: '127.0.0.1', port: 1, ephemeral: false }, { allowError: true });
      await api('DELETE', '/nacos/v1/ns/service', { namespaceId: NS, serviceName: SVC_SICK, groupName: GROUP }, { allowError: true });
    }
    await visit(`#/service/${NS}/${GROUP}/${SVC}`, row(ADDR), 'the service detail');
    for (const x of extra) await expectHidden(row(x.key), `the removed ${x.key}`);
    return out;
  });

  await step('language', async () => {
    await tid('lang-zh').click();
    await expectText(tid('nav-namespaces'), '命名空间', 'the namespaces menu item in Chinese');
    await expectText(tid('nav-services'), '服务列表', 'the services menu item in Chinese');
    await expectText(tid('nav-sync'), '同步任务', 'the sync tasks menu item in Chinese');
    await expectText(tid('nav-roles'), '角色管理', 'the roles menu item in Chinese');
    await expectText(tid('nav-permissions'), '权限管理', 'the permissions menu item in Chinese');
    await expectText(tid('nav-audit'), '审计日志', 'the audit menu item in Chinese');
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
    // the gRPC clients this node holds (none: the flow speaks HTTP), as it counts them
    await expectText(page.locator('[data-testid^="member-grpc-"]').first(), /^0$/, 'the gRPC clients of a member');
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

  await step('configs', async () => {
    await tid('nav-configs').click();
    await expectUrl(/#\/configs\?namespaceId=/, 'the configurations menu');
    if (!page.url().endsWith(`namespaceId=${NS}`)) {
      await tid('ns-switcher').click();
      await page.locator(`.ant-select-dropdown [data-testid="ns-switcher-option-${NS}"]`).click();
    }
    await expectUrl(new RegExp(`#/configs\\?namespaceId=${NS}$`), `the configurations of ${NS}`);
    await expectVisible(tid('empty-state'), `the empty configurations list of ${NS}`);

    // Create: group and format default, the item listed, the API shows every field.
    await tid('cfg-create').click();
    await expectVisible(tid('cfg-form-data-id'), 'the create-configuration dialog');
    check((await tid('cfg-form-group').inputValue()) === GROUP, `the group does not default to ${GROUP}`);
    await tid('cfg-form-data-id').fill(CFG);
    await clickInDialog(tid('cfg-form-type'));
    await tid('cfg-form-type-option-yaml').click();
    await tid('cfg-form-app').fill('console-app');
    await tid('cfg-form-tags').fill('console, test');
    await tid('cfg-form-desc').fill('made by the console browser test');
    await tid('cfg-form-content').fill(CFG_V1);
    let refused = await submitForm('cfg-form');
    check(refused === null, `creating ${CFG} was refused: ${refused}`);
    await expectVisible(row(CFG_KEY), `configuration ${CFG} in the table`);
    await expectText(tid(`cfg-type-${CFG_KEY}`), 'yaml', `the format of ${CFG}`);
    await expectText(tid(`cfg-modified-${CFG_KEY}`), /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/, `the time ${CFG} changed`);
    let stored = await storedConfig();
    check(
      stored?.content === CFG_V1 && stored.type === 'yaml' && stored.appName === 'console-app' && stored.configTags === 'console,test',
      `the API shows ${JSON.stringify(stored)}`,
    );
    // The same again: refused in the dialog, nothing overwritten.
    await tid('cfg-create').click();
    await expectVisible(tid('cfg-form-data-id'), 'the create-configuration dialog');
    await tid('cfg-form-data-id').fill(CFG);
    await tid('cfg-form-content').fill('overwritten: true\n');
    const exists = await submitForm('cfg-form');
    check(exists && /already exists/.test(exists), `creating ${CFG} twice: expected a refusal, saw ${exists}`);
    await clickInDialog(tid('cfg-form-cancel'));
    await expectHidden(tid('cfg-editor'), 'the create-configuration dialog');
    check((await storedConfig())?.content === CFG_V1, `creating ${CFG} twice changed it`);
    await shot('configs');

    // Search: by part (fuzzy), by pattern, exactly.
    await tid('cfg-search-data-id').fill('no-such-config');
    await expectHidden(row(CFG_KEY), `${CFG} when searching for another name`);
    await expectVisible(tid('empty-state'), 'the empty search result');
    await tid('cfg-search-data-id').fill('app.yam');
    await expectVisible(row(CFG_KEY), `${CFG} found by part of its name`);
    await tid('cfg-search-blur').click();
    await expectHidden(row(CFG_KEY), `${CFG} when part of its name must match exactly`);
    await tid('cfg-search-data-id').fill(CFG);
    await expectVisible(row(CFG_KEY), `${CFG} found by its exact name`);
    await tid('cfg-search-group').fill('DEFAULT');
    await expectHidden(row(CFG_KEY), `${CFG} when part of its group must match exactly`);
    await tid('cfg-search-blur').click();
    await tid('cfg-search-data-id').fill(`${NS}-*.yaml`);
    await expectVisible(row(CFG_KEY), `${CFG} found by a pattern and part of its group`);
    await tid('cfg-search-data-id').fill('');
    await tid('cfg-search-group').fill('');

    // Edit: the diff from the stored version shows before anything is published.
    await tid(`cfg-edit-${CFG_KEY}`).click();
    await expectEditorContent(CFG_V1, 'the edit dialog');
    await tid('cfg-form-content').fill(CFG_V2);
    await clickInDialog(tid('cfg-form-submit'));
    await expectVisible(tid('cfg-diff'), 'the diff before publishing');
    const diff = await diffLinesOf('cfg-diff');
    check(
      JSON.stringify(diff) === JSON.stringify({ added: ['  port: 9090', '  cart: true'], removed: ['  port: 8080'] }),
      `the diff shows ${JSON.stringify(diff)}`,
    );
    const green = await diffColour('cfg-diff', 'add');
    const red = await diffColour('cfg-diff', 'del');
    check(/^rgb\(2\d\d, 255, 2\d\d\)$/.test(green), `added lines are drawn in ${green}, not green`);
    check(/^rgb\(255, 2\d\d, 2\d\d\)$/.test(red), `removed lines are drawn in ${red}, not red`);
    check((await storedConfig())?.content === CFG_V1, 'the edit was published before it was confirmed');
    await shot('config-diff');
    await clickInDialog(tid('cfg-form-publish'));
    await expectHidden(tid('cfg-editor'), 'the edit dialog after publishing');
    stored = await storedConfig();
    check(stored?.content === CFG_V2, `the API shows content ${JSON.stringify(stored?.content)} after the edit`);
    check(stored.type === 'yaml' && stored.appName === 'console-app', `the edit changed other fields: ${JSON.stringify(stored)}`);

    // History: the two versions, newest first; the first viewed, then rolled back to.
    await tid(`cfg-history-${CFG_KEY}`).click();
    await expectVisible(page.locator('[data-testid="cfg-history-table"] tbody tr.ant-table-row'), 'the versions');
    let versions = await historyRows();
    check(versions[0]?.op === 'U' && versions[1]?.op === 'I', `the history lists ${JSON.stringify(versions)}`);
    await shot('config-history');
    const first = versions[1].id;
    await tid(`cfg-history-view-${first}`).click();
    await expectVisible(tid('cfg-version-content'), 'the first version');
    const viewed = await tid('cfg-version-content').textContent();
    check(viewed === CFG_V1, `the first version shows ${JSON.stringify(viewed)}`);
    await clickInDialog(tid('cfg-history-to-rollback'));
    await expectVisible(tid('cfg-rollback-diff'), 'the diff of the rollback');
    const back = await diffLinesOf('cfg-rollback-diff');
    check(
      JSON.stringify(back) === JSON.stringify({ added: ['  port: 8080'], removed: ['  port: 9090', '  cart: true'] }),
      `the rollback diff shows ${JSON.stringify(back)}`,
    );
    await clickInDialog(tid('cfg-history-rollback-ok'));
    await expectVisible(page.locator('[data-testid="cfg-history"][data-pane="list"]'), 'the versions after the rollback');
    const listed = Date.now() + ACTION_MS;
    do {
      versions = await historyRows();
      if (versions[0]?.op === 'U' && versions[2]?.id === first) break;
      await page.waitForTimeout(100);
    } while (Date.now() < listed);
    check(versions[0]?.op === 'U' && versions[2]?.id === first, `after the rollback the history lists ${JSON.stringify(versions)}`);
    await expectVisible(tid('cfg-history-current'), 'the current version mark');
    stored = await storedConfig();
    check(stored?.content === CFG_V1, `the API shows content ${JSON.stringify(stored?.content)} after the rollback`);
    await clickInDialog(tid('cfg-history-close'));
    await expectHidden(tid('cfg-history'), 'the history dialog');

    // A stale edit: changed through the API while the dialog is open, refused on publishing.
    await tid(`cfg-edit-${CFG_KEY}`).click();
    await expectEditorContent(CFG_V1, 'the edit dialog');
    await tid('cfg-form-content').fill(CFG_V3);
    await api('POST', '/nacos/v1/cs/configs', { dataId: CFG, group: GROUP, tenant: NS, content: CFG_API, type: 'yaml' });
    await clickInDialog(tid('cfg-form-submit'));
    await expectVisible(tid('cfg-diff'), 'the diff of the stale edit');
    await clickInDialog(tid('cfg-form-publish'));
    await expectVisible(tid('cfg-form-error'), 'the conflict of the stale edit');
    const conflict = ((await tid('cfg-form-error').textContent()) ?? '').trim();
    check(/changed after you opened it/.test(conflict), `the stale edit shows ${JSON.stringify(conflict)}`);
    check((await storedConfig())?.content === CFG_API, 'the stale edit overwrote the change made through the API');
    await shot('config-conflict');
    // Compared with the current version, the edit goes through.
    await clickInDialog(tid('cfg-form-rebase'));
    await expectHidden(tid('cfg-form-error'), 'the conflict, once compared again');
    const rebased = await diffLinesOf('cfg-diff');
    check(rebased.removed.includes('  port: 7070'), `the diff after comparing again shows ${JSON.stringify(rebased)}`);
    await clickInDialog(tid('cfg-form-publish'));
    await expectHidden(tid('cfg-editor'), 'the edit dialog after publishing');
    check((await storedConfig())?.content === CFG_V3, 'the edit compared again was not published');

    // Export: the namespace, as Nacos' zip holding the item (`group/dataId` and metadata).
    const exported = await downloadThrough(tid('cfg-export'));
    check(exported.bytes.subarray(0, 2).toString('latin1') === 'PK', `the export ${exported.name} is not a zip`);
    check(
      exported.bytes.includes(CFG_KEY) && exported.bytes.includes('.metadata.yml') && /\.zip$/.test(exported.name),
      `the export ${exported.name} does not hold ${CFG_KEY} and its metadata`,
    );
    check(!exported.url.searchParams.has('ids') && exported.url.searchParams.get('tenant') === NS, `the export asked ${exported.url}`);
    // The selected rows only: asked for by id.
    stored = await storedConfig();
    await row(CFG_KEY).locator('.ant-table-selection-column input[type="checkbox"]').check();
    await expectText(tid('cfg-export'), 'Export selected (1)', 'the export button with a row selected');
    const picked = await downloadThrough(tid('cfg-export'));
    check(picked.url.searchParams.get('ids') === String(stored.id), `the export of the selection asked ${picked.url} (the item is ${stored.id})`);
    check(picked.bytes.subarray(0, 2).toString('latin1') === 'PK' && picked.bytes.includes(CFG_KEY), 'the export of the selection');
    await tid('cfg-selection-clear').click();
    await expectText(tid('cfg-export'), 'Export', 'the export button once the selection is cleared');

    // Import the export back: ABORT refuses (naming the item), SKIP leaves it as it is.
    const archive = { name: exported.name, mimeType: 'application/zip', buffer: exported.bytes };
    await tid('cfg-import-open').click();
    await expectVisible(tid('cfg-import'), 'the import dialog');
    await page.locator('[data-testid="cfg-import-file"] input[type="file"]').setInputFiles(archive);
    await expectVisible(page.locator('[data-testid="cfg-import-file"] .ant-upload-list-item'), 'the picked file');
    await clickInDialog(tid('cfg-import-submit'));
    const aborted = await expectText(tid('cfg-import-error'), /exist already/, 'importing with ABORT');
    check(aborted.includes(CFG_KEY), `the ABORT refusal does not name ${CFG_KEY}: ${aborted}`);
    await tid('cfg-import-policy-SKIP').check();
    await expectHidden(tid('cfg-import-error'), 'the refusal once the policy changed');
    await clickInDialog(tid('cfg-import-submit'));
    const imported = await expectText(tid('cfg-import-result'), /Imported 0, skipped 1\./, 'importing with SKIP');
    check(imported.includes(CFG_KEY), `the SKIP result does not name ${CFG_KEY}: ${imported}`);
    check((await storedConfig())?.md5 === stored.md5, 'importing with SKIP changed the item');
    await shot('config-import');
    await clickInDialog(tid('cfg-import-close'));
    await expectHidden(tid('cfg-import'), 'the import dialog');

    // Listeners: long polls held on the item (v1 HTTP clients) are listed, and Refresh
    // shows one that came after the dialog opened.
    const polls = [holdLongPoll(stored.md5, POLL_AGENTS[0])];
    await expectListening(POLL_AGENTS.slice(0, 1));
    await tid(`cfg-listeners-${CFG_KEY}`).click();
    await expectVisible(page.locator('[data-testid="cfg-listeners-table"] tbody tr.ant-table-row'), 'the listeners');
    let listening = await listenerRows();
    check(
      listening.length === 1 &&
        listening[0].protocol === 'http' &&
        listening[0].client === POLL_AGENTS[0] &&
        listening[0].current === 'true' &&
        listening[0].colors.includes('green'),
      `the listeners dialog lists ${JSON.stringify(listening)}`,
    );
    polls.push(holdLongPoll(stored.md5, POLL_AGENTS[1]));
    await expectListening(POLL_AGENTS);
    await clickInDialog(tid('cfg-listeners-refresh'));
    const refreshed = Date.now() + ACTION_MS;
    do {
      listening = await listenerRows();
      if (listening.length === 2) break;
      await page.waitForTimeout(100);
    } while (Date.now() < refreshed);
    check(
      JSON.stringify(listening.map((l) => l.client).sort()) === JSON.stringify(POLL_AGENTS) &&
        listening.every((l) => l.protocol === 'http' && l.current === 'true'),
      `after Refresh the listeners dialog lists ${JSON.stringify(listening)}`,
    );
    await shot('config-listeners');
    await clickInDialog(tid('cfg-listeners-close'));
    await expectHidden(tid('cfg-listeners'), 'the listeners dialog');

    // 中文
    await tid('lang-zh').click();
    await expectText(tid('nav-configs'), '配置管理', 'the configurations menu item in Chinese');
    await expectText(page.locator('thead'), /配置格式/, 'the configurations table header in Chinese');
    // the language switch's tooltip out of the picture
    await page.mouse.move(0, 600);
    await expectHidden(page.locator('.ant-tooltip:not(.ant-tooltip-hidden)'), "the language switch's tooltip");
    await shot('configs-zh');
    // the two dialogs too (the long polls are still held)
    await tid(`cfg-listeners-${CFG_KEY}`).click();
    await expectText(page.locator('.ant-modal:has([data-testid="cfg-listeners"]) .ant-modal-title'), `${CFG} 的监听者`, 'the listeners dialog in Chinese');
    await expectVisible(page.locator('[data-testid="cfg-listeners-table"] tbody tr.ant-table-row'), 'the listeners in Chinese');
    await shot('config-listeners-zh');
    await clickInDialog(tid('cfg-listeners-close'));
    await expectHidden(tid('cfg-listeners'), 'the listeners dialog');
    await tid('cfg-import-open').click();
    await expectText(page.locator('.ant-modal:has([data-testid="cfg-import"]) .ant-modal-title'), `导入配置到 ${NS}`, 'the import dialog in Chinese');
    await page.locator('[data-testid="cfg-import-file"] input[type="file"]').setInputFiles(archive);
    await tid('cfg-import-policy-OVERWRITE').check();
    await shot('config-import-zh');
    await clickInDialog(tid('cfg-import-cancel'));
    await expectHidden(tid('cfg-import'), 'the import dialog');
    await Promise.all(polls.map((p) => p.end()));
    await tid('lang-en').click();
    await expectText(tid('nav-configs'), 'Configurations', 'the configurations menu item back in English');

    // Delete, through the confirmation.
    await tid(`cfg-delete-${CFG_KEY}`).click();
    refused = await confirmInUi(`deleting ${CFG}`);
    check(refused === null, `deleting ${CFG} was refused: ${refused}`);
    await expectHidden(row(CFG_KEY), `the row of ${CFG}`);
    check((await storedConfig()) === null, `the API still has ${CFG}`);
    return { diff, conflict, exported: exported.bytes.length, imported, listening };
  });

  await step('nav-refetch', async () => {
    // Each page, opened from the menu, then its menu item (or the brand link) clicked
    // again: the page asks for its data again. Before the click the page stays quiet
    // (nothing polls it), so the request is the click's.
    const QUIET_MS = 1000;
    const pages = [
      { nav: 'nav-namespaces', url: /#\/namespaces$/, data: '/nacos/v1/console/namespaces', shown: row('public') },
      { nav: 'nav-overview', url: /#\/overview$/, data: '/api/v1/overview', shown: tid('overview-summary') },
      { nav: 'brand', url: /#\/overview$/, data: '/api/v1/overview', shown: tid('overview-summary') },
      { nav: 'nav-services', url: /#\/services\?/, data: '/nacos/v1/ns/catalog/services', shown: tid(`svc-link-${GROUP}-${SVC}`) },
      // the configuration made in the test was deleted
      { nav: 'nav-configs', url: /#\/configs\?/, data: '/nacos/v1/cs/configs', shown: tid('empty-state') },
      // every task was deleted: the empty state shows once the list is in
      { nav: 'nav-sync', url: /#\/sync$/, data: '/api/v1/sync/tasks', shown: tid('empty-state') },
      {
        nav: 'nav-cluster',
        url: /#\/cluster$/,
        data: '/api/v1/cluster',
        shown: page.locator('[data-testid="cluster-table"] tbody tr.ant-table-row'),
      },
      { nav: 'nav-users', url: /#\/users$/, data: '/nacos/v1/auth/users', shown: row(args.username) },
      { nav: 'nav-roles', url: /#\/roles$/, data: '/nacos/v1/auth/roles', shown: row(`ROLE_ADMIN/${args.username}`) },
      { nav: 'nav-permissions', url: /#\/permissions$/, data: '/nacos/v1/auth/permissions', shown: tid('perm-table') },
      { nav: 'nav-audit', url: /#\/audit$/, data: '/api/v1/audit', shown: tid('audit-table') },
    ];
    await markPage();
    const counts = {};
    for (const p of pages) {
      const where = p.nav === 'brand' ? 'nav-overview' : p.nav;
      if (!p.url.test(page.url())) await tid(where).click();
      await expectUrl(p.url, `the page of ${p.nav}`);
      await expectVisible(p.shown, `the page of ${p.nav}`);
      for (const auto of ['cluster-auto', 'audit-auto', 'overview-auto']) {
        if ((await tid(auto).count()) && (await tid(auto).getAttribute('aria-checked')) === 'true') {
          // its own refresh would hide whether the click refetches
          await tid(auto).click();
        }
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

  await step('roles', async () => {
    // The user and the second namespace come through the API; the role through the UI.
    await api('POST', '/nacos/v1/auth/users', { username: RBAC_USER, password: RBAC_PASSWORD });
    await api('POST', '/nacos/v1/console/namespaces', {
      customNamespaceId: NS_RO,
      namespaceName: `Read-only ${NS_RO}`,
      namespaceDesc: 'read-only for the console test user',
    });
    await tid('nav-roles').click();
    await expectUrl(/#\/roles$/, 'the roles menu');
    await expectVisible(row(`ROLE_ADMIN/${args.username}`), `the ROLE_ADMIN row of ${args.username}`);
    await expectLive('the roles page');

    await tid('role-create').click();
    await expectVisible(tid('role-form-role'), 'the bind-role dialog');
    await tid('role-form-role').fill(ROLE);
    await pickRoleUser(RBAC_USER);
    const refused = await submitForm('role-form');
    check(refused === null, `binding ${ROLE} to ${RBAC_USER} was refused: ${refused}`);
    await expectVisible(row(`${ROLE}/${RBAC_USER}`), `the binding of ${ROLE} to ${RBAC_USER}`);
    check((await holdersOf(ROLE)).includes(RBAC_USER), `the API does not show ${RBAC_USER} holding ${ROLE}`);

    // Bound again, picked from the role completion: the server's 409, in the dialog.
    await tid('role-create').click();
    await expectVisible(tid('role-form-role'), 'the bind-role dialog');
    await tid('role-form-role').fill(ROLE.slice(0, -2));
    await tid(`role-form-role-option-${ROLE}`).click();
    await pickRoleUser(RBAC_USER);
    const conflict = await submitForm('role-form');
    check(conflict && /already bound/.test(conflict), `binding it twice: expected the server's refusal, saw ${conflict}`);
    await shot('role-bind-refused');
    await clickInDialog(tid('role-form-cancel'));
    await expectHidden(tid('role-form-form'), 'the bind-role dialog');
    await shot('roles');
    return { refusal: conflict };
  });

  await step('permissions', async () => {
    await tid(`role-permissions-${ROLE}/${RBAC_USER}`).click();
    await expectUrl(new RegExp(`#/permissions\\?role=${ROLE}$`), 'the permissions of the role');
    await expectVisible(tid('empty-state'), `no permissions of ${ROLE} yet`);
    await expectLive('the permissions page');

    // The simple form: whole namespaces, the role prefilled from the filter.
    let refused = await grantInUi({ namespace: NS, action: 'rw', shotName: 'permission-grant' });
    check(refused === null, `granting rw on ${NS} was refused: ${refused}`);
    await expectVisible(row(`${ROLE}|${NS}:*:*|rw`), `the rw permission on ${NS}`);
    refused = await grantInUi({ namespace: NS_RO, action: 'r' });
    check(refused === null, `granting r on ${NS_RO} was refused: ${refused}`);
    await expectVisible(row(`${ROLE}|${NS_RO}:*:*|r`), `the r permission on ${NS_RO}`);

    // The advanced field: a pattern; then revoked through the confirmation.
    const pattern = `${NS_RO}:*:naming/nothing*`;
    refused = await grantInUi({ pattern, action: 'w' });
    check(refused === null, `granting w on ${pattern} was refused: ${refused}`);
    await expectVisible(row(`${ROLE}|${pattern}|w`), `the w permission on ${pattern}`);
    await tid(`perm-revoke-${ROLE}|${pattern}|w`).click();
    const revokeRefused = await confirmInUi(`revoking w on ${pattern}`);
    check(revokeRefused === null, `revoking w on ${pattern} was refused: ${revokeRefused}`);
    await expectHidden(row(`${ROLE}|${pattern}|w`), `the revoked permission on ${pattern}`);

    // A role nobody holds: the server's 404, in the dialog.
    const unheld = await grantInUi({ role: ROLE_UNHELD, namespace: NS, action: 'r' });
    check(unheld && /not found/.test(unheld), `granting to a role nobody holds: expected the server's refusal, saw ${unheld}`);
    await clickInDialog(tid('perm-form-cancel'));
    await expectHidden(tid('perm-form-form'), 'the grant dialog');

    const granted = (await permissionsOf(ROLE)).map((p) => `${p.resource} ${p.action}`).sort();
    const expected = [`${NS_RO}:*:* r`, `${NS}:*:* rw`].sort();
    check(JSON.stringify(granted) === JSON.stringify(expected), `the API shows ${JSON.stringify(granted)}, expected ${JSON.stringify(expected)}`);
    await shot('permissions');
    return { granted, refusal: unheld };
  });

  await step('audit', async () => {
    await tid('nav-audit').click();
    await expectUrl(/#\/audit$/, 'the audit menu');
    await expectVisible(tid('audit-table'), 'the audit table');
    await tid('audit-filter-user').fill(args.username);
    // What was just done, newest first (the trail is written in the background: the
    // page's refresh button until it is all there).
    const wanted = [
      { action: 'POST /nacos/v1/auth/roles', resource: `role:${ROLE}`, status: 200, colour: 'green' },
      { action: 'POST /nacos/v1/auth/roles', resource: `role:${ROLE}`, status: 409, colour: 'orange' },
      { action: 'POST /nacos/v1/auth/permissions', resource: `role:${ROLE}`, status: 200, colour: 'green' },
      { action: 'DELETE /nacos/v1/auth/permissions', resource: `role:${ROLE}`, status: 200, colour: 'green' },
      { action: 'POST /nacos/v1/auth/permissions', resource: `role:${ROLE_UNHELD}`, status: 404, colour: 'orange' },
    ];
    const deadline = Date.now() + ACTION_MS;
    let rows = [];
    let missing = wanted;
    while (Date.now() < deadline) {
      rows = await auditRows();
      missing = wanted.filter(
        (w) => !rows.some((r) => r.action === w.action && r.resource === w.resource && r.status === w.status && r.colors.includes(w.colour)),
      );
      if (missing.length === 0) break;
      await tid('audit-refresh').click();
      await page.waitForTimeout(500);
    }
    check(missing.length === 0, `the audit page does not show ${JSON.stringify(missing)}; it shows ${JSON.stringify(rows.slice(0, 12))}`);
    // newest first: the revocation came after the bindings
    const at = (w) => rows.findIndex((r) => r.action === w.action && r.resource === w.resource && r.status === w.status);
    check(at(wanted[3]) < at(wanted[0]), 'the audit entries are not newest first');
    // "truncated" as the API says it for the same filter (nothing the admin does in between)
    await tid('audit-refresh').click();
    await page.waitForTimeout(500);
    const r = await api('GET', '/api/v1/audit', { user: args.username, limit: 100 });
    const shown = (await tid('audit-truncated').count()) > 0;
    check(shown === r.json.truncated, `the page ${shown ? 'says' : 'does not say'} truncated; the API says ${r.json.truncated}`);
    await shot('audit');
    return { rowsOnFirstPage: rows.length, entriesOfUser: r.json.entries.length, truncated: shown };
  });

  await step('clients', async () => {
    // An address client publishing an instance (v1, ephemeral, beating), and another
    // subscribed over UDP (a push-capable agent, at a socket of this process).
    await api('POST', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC_CLIENTS, ip: CLIENT_IP, port: PORT, ephemeral: true });
    const beat = () =>
      api('PUT', '/nacos/v1/ns/instance/beat', {
        namespaceId: NS,
        serviceName: `${GROUP}@@${SVC_CLIENTS}`,
        beat: JSON.stringify({ ip: CLIENT_IP, port: PORT, serviceName: `${GROUP}@@${SVC_CLIENTS}`, cluster: 'DEFAULT' }),
      });
    const udp = dgram.createSocket('udp4');
    await new Promise((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(0, CLIENT_IP, resolve);
    });
    const udpPort = udp.address().port;
    try {
      const qs = new URLSearchParams({ namespaceId: NS, serviceName: SVC_CLIENTS, udpPort: String(udpPort), clientIP: CLIENT_IP, app: CLIENT_APP });
      const sub = await fetch(`${BASE}/nacos/v1/ns/instance/list?${qs}`, {
        headers: { Authorization: `Bearer ${apiToken}`, 'User-Agent': 'Nacos-Java-Client:v1.4.8' },
        signal: AbortSignal.timeout(ACTION_MS),
      });
      check(sub.ok, `the UDP subscription answered ${sub.status}: ${await sub.text()}`);
      const publisher = `${CLIENT_IP}:${PORT}#true`;
      const subscriber = `${CLIENT_IP}:${udpPort}#true`;
      const listed = (await api('GET', '/api/v1/clients', { ip: CLIENT_IP })).json.clients.map((c) => c.clientId).sort();
      check(JSON.stringify(listed) === JSON.stringify([publisher, subscriber].sort()), `/api/v1/clients?ip=${CLIENT_IP} lists ${JSON.stringify(listed)}`);

      // The page: searched by IP, both; by app name, the subscriber only.
      await tid('nav-clients').click();
      await expectUrl(/#\/clients$/, 'the clients menu');
      await expectVisible(tid('clients-table'), 'the clients table');
      const search = tid('clients-search');
      const shown = () => page.locator('[data-testid="clients-table"] [data-testid="client-row"]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-client')).sort());
      const expectRows = async (wanted, what) => {
        const deadline = Date.now() + ACTION_MS;
        let rows = [];
        while (Date.now() < deadline) {
          rows = await shown();
          if (JSON.stringify(rows) === JSON.stringify([...wanted].sort())) return;
          await page.waitForTimeout(200);
        }
        check(false, `${what}: the clients page shows ${JSON.stringify(rows)}, expected ${JSON.stringify(wanted)}`);
      };
      await search.fill(CLIENT_IP);
      await expectRows([publisher, subscriber], `searching ${CLIENT_IP}`);
      await search.fill(CLIENT_APP);
      await expectRows([subscriber], `searching ${CLIENT_APP}`);
      const subRow = page.locator(`[data-testid="client-row"][data-client="${subscriber}"]`);
      await expectText(subRow.locator('[data-testid="client-app"]'), CLIENT_APP, 'the subscriber\'s app');
      await expectText(subRow.locator('[data-testid="client-subscribed-count"]'), '1', 'the subscriber\'s subscriptions');
      await search.fill(CLIENT_IP);
      await expectRows([publisher, subscriber], `searching ${CLIENT_IP} again`);
      await shot('clients');

      // The publisher's detail: its instance, linked to its service's page.
      await page.locator(`[data-testid="client-row"][data-client="${publisher}"] [data-testid="client-open"]`).click();
      const detail = tid('client-detail');
      // the drawer slides in: measured once it is all on the screen
      const slidIn = () =>
        page.waitForFunction(
          () => {
            const d = document.querySelector('.ant-drawer-content-wrapper');
            return d !== null && Math.round(d.getBoundingClientRect().right) <= window.innerWidth;
          },
          null,
          { timeout: ACTION_MS },
        );
      await expectVisible(detail, 'the client detail');
      await slidIn();
      await expectText(detail.locator('[data-testid="client-detail-id"]'), publisher, 'the client detail\'s id');
      const link = detail.locator(`[data-testid="client-published"] [data-testid="client-service-link"][data-service="${SVC_CLIENTS}"]`);
      await expectVisible(link, `service ${SVC_CLIENTS} among the published instances`);
      await expectText(detail.locator('[data-testid="client-published"]'), new RegExp(`${CLIENT_IP.replace(/\./g, '\\.')}:${PORT}`), 'the published instance\'s address');
      await beat();
      await shot('client-detail');
      // In Chinese (the drawer's mask covers the language switch: closed meanwhile).
      const openPublisher = async () => {
        await page.locator(`[data-testid="client-row"][data-client="${publisher}"] [data-testid="client-open"]`).click();
        await expectVisible(detail, 'the client detail');
        await slidIn();
      };
      await page.keyboard.press('Escape');
      await expectHidden(detail, 'the client detail, closed');
      await tid('lang-zh').click();
      // the language switch's tooltip out of the picture
      await page.mouse.move(0, VIEWPORT.height - 1);
      await expectText(page.locator('.page-title h3'), '客户端', 'the clients page in Chinese');
      await shot('clients-zh');
      await openPublisher();
      await expectText(page.locator('.ant-drawer-title'), '客户端', 'the client detail in Chinese');
      await expectText(detail, /发布的实例（1）/, 'the published instances in Chinese');
      await shot('client-detail-zh');
      await page.keyboard.press('Escape');
      await expectHidden(detail, 'the client detail, closed');
      await tid('lang-en').click();
      // The service link leads to the service's page.
      await openPublisher();
      await link.click();
      await expectUrl(new RegExp(`#/service/${NS}/${GROUP}/${SVC_CLIENTS}$`), 'the published service\'s link');
      await expectVisible(row(`${CLIENT_IP}:${PORT}`), `the instance ${CLIENT_IP}:${PORT} on its service's page`);
      return { clients: listed, udpPort };
    } finally {
      udp.close();
      await api('DELETE', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC_CLIENTS, ip: CLIENT_IP, port: PORT, ephemeral: true }, { allowError: true });
      await api('DELETE', '/nacos/v1/ns/service', { namespaceId: NS, serviceName: SVC_CLIENTS, groupName: GROUP }, { allowError: true });
    }
  });

  await step('api-tokens', async () => {
    // A long-lived token for the test user, made in the UI: shown once, it works as
    // that user; revoked in the UI, it stops.
    await tid('nav-tokens').click();
    await expectUrl(/#\/tokens$/, 'the API tokens menu');
    await expectVisible(tid('tokens-table'), 'the tokens table');
    await tid('token-create').click();
    await expectVisible(tid('token-form-form'), 'the new-token dialog');
    await clickInDialog(tid('token-form-user'));
    await tid(`token-form-user-option-${RBAC_USER}`).click();
    await tid('token-form-description').fill('made by the console test');
    const refused = await submitForm('token-form');
    check(refused === null, `the token was refused: ${refused}`);
    await expectVisible(tid('token-secret'), 'the token, shown once');
    const secret = ((await tid('token-secret').textContent()) ?? '').trim();
    check(/^roster_[0-9a-f]{16}_[0-9a-f]{64}$/.test(secret), `the token shown: ${JSON.stringify(secret)}`);
    const id = secret.slice('roster_'.length, 'roster_'.length + 16);
    const asToken = async () =>
      (await fetch(`${BASE}/nacos/v1/ns/catalog/services?namespaceId=${NS_RO}`, {
        headers: { Authorization: `Bearer ${secret}` },
        signal: AbortSignal.timeout(ACTION_MS),
      })).status;
    const before = await asToken();
    check(before === 200, `${RBAC_USER}'s token reading ${NS_RO} answered ${before}`);
    await shot('token-created');
    await clickInDialog(tid('token-created-close'));
    await expectVisible(row(id), `token ${id} in the table`);
    await expectText(row(id), new RegExp(RBAC_USER), 'the token\'s user');
    await tid(`token-revoke-${id}`).click();
    await clickInDialog(tid('confirm-ok'));
    await expectHidden(row(id), `token ${id}, revoked`);
    const after = await asToken();
    check(after === 401 || after === 403, `the revoked token answered ${after}`);
    return { before, after };
  });

  await step('layout', async () => {
    // An instance as a sync task imports it (its five provenance keys, long values) and a
    // dry-run task with a report, on a 1366 × 768 screen, in both languages.
    const imported = {
      syncSource: 'etcd://etcd-0.prod.internal:2379?layout=go-micro&prefix=/micro/registry/',
      sourceClusterId: 'etcd-prod-cluster-7f3a9c2e-4b1d-4e8a-9f6b-2c5d8e1a3b7f',
      'sync.taskId': 'import-prod-etcd',
      'sync.sourceInstanceId': 'helloworld-3f2a9c1e-7b4d-4e8a-9f6b-2c5d8e1a3b7f-127.0.44.17-9090',
      'sync.instance.tag': 'go-micro/v4 helloworld 1.2.3 region=eu-west-1 zone=eu-west-1a',
      version: '1.2.3',
    };
    await api('POST', '/nacos/v1/ns/instance', {
      namespaceId: NS,
      serviceName: SVC,
      ip: '127.0.0.2',
      port: PORT,
      ephemeral: false,
      metadata: JSON.stringify(imported),
    });
    await apiJson('POST', '/api/v1/sync/tasks', { name: TASK_DRY, source: SOURCE, dryRun: true });
    await registerFaceInstances();
    const pages = [
      { name: 'namespaces', hash: '#/namespaces', shown: () => row(NS) },
      { name: 'services', hash: `#/services?namespaceId=${NS}`, shown: () => tid(`svc-link-${GROUP}-${SVC}`) },
      { name: 'service-detail', hash: `#/service/${NS}/${GROUP}/${SVC}`, shown: () => tid(`inst-edit-127.0.0.2:${PORT}`) },
      { name: 'service-faces', hash: `#/service/${NS}/${GROUP}/${SVC_FACES}`, shown: () => tid(`inst-face-${FACES[2][0]}:${PORT}`) },
      { name: 'configs', hash: `#/configs?namespaceId=${NS}`, shown: () => tid('cfg-table') },
      { name: 'sync', hash: '#/sync', shown: () => row(TASK_DRY) },
      { name: 'cluster', hash: '#/cluster', shown: () => page.locator('[data-testid="cluster-table"] tbody tr.ant-table-row') },
      { name: 'users', hash: '#/users', shown: () => row(RBAC_USER) },
      { name: 'roles', hash: '#/roles', shown: () => row(`${ROLE}/${RBAC_USER}`) },
      { name: 'permissions', hash: '#/permissions', shown: () => tid('perm-table') },
      { name: 'tokens', hash: '#/tokens', shown: () => tid('tokens-table') },
      { name: 'audit', hash: '#/audit', shown: () => tid('audit-table') },
    ];
    const seen = {};
    // every page in both languages before failing: one run shows all that does not fit
    const misfits = [];
    for (const lang of ['en', 'zh']) {
      await tid(`lang-${lang}`).click();
      for (const p of pages) {
        await visit(p.hash, p.shown(), `the ${p.name} page in ${lang}`);
        if (p.name === 'sync') {
          // the dry run's report, with its apply button beside it
          if ((await tid(`sync-apply-${TASK_DRY}`).count()) === 0) await row(TASK_DRY).locator('.ant-table-row-expand-icon').click();
          await expectVisible(tid(`sync-apply-${TASK_DRY}`), `the apply button of ${TASK_DRY} in ${lang}`);
        }
        if (p.name === 'service-detail') {
          // one badge instead of the provenance tags; the rest of the metadata as chips
          const cell = row(`127.0.0.2:${PORT}`);
          await expectText(cell.locator('[data-testid="meta-imported"]'), /import-prod-etcd/, `the imported-by badge in ${lang}`);
          const chips = await cell.locator('.meta-k').allTextContents();
          check(chips.join() === 'version', `the imported instance shows metadata chips ${JSON.stringify(chips)}, expected only version`);
        }
        if (p.name === 'service-faces') {
          // each instance names the face it came through, under a header in the console's language
          const header = lang === 'en' ? 'Registered by' : '注册来源';
          await expectVisible(page.locator('th.ant-table-cell', { hasText: header }), `the "${header}" column in ${lang}`);
          for (const [ip, face, label] of FACES) {
            const tag = tid(`inst-face-${ip}:${PORT}`);
            await expectText(tag, label, `the registered-by tag of ${ip} in ${lang}`);
            const shown = await tag.first().getAttribute('data-face');
            check(shown === face, `${ip} shows registered by ${shown}, expected ${face}, in ${lang}`);
          }
          // the HTTP tag says which faces it stands for
          await tid(`inst-face-${FACES[0][0]}:${PORT}`).hover();
          const hint = page.locator('.ant-tooltip:not(.ant-tooltip-hidden) .ant-tooltip-inner');
          await expectText(hint, /roster API/, `the HTTP tag's tooltip in ${lang}`);
          await page.mouse.move(0, VIEWPORT.height - 1);
          await expectHidden(hint, 'the HTTP tag tooltip');
        }
        // the language switch's tooltip out of the picture
        await page.mouse.move(0, VIEWPORT.height - 1);
        const problems = await fitProblems(page);
        if (problems.length) misfits.push(`the ${p.name} page in ${lang}: ${problems.join('; ')}`);
        // (checked above, with the other pages)
        if (lang === 'zh') await shot(`${p.name}-zh`, { fits: false });
        else if (p.name === 'service-detail' || p.name === 'sync') await shot(`${p.name}-1366`, { fits: false });
      }
      // Users: the only admin, who is also the one logged in, cannot be deleted, and the
      // page says why; another user can.
      await visit('#/users', row(RBAC_USER), `the users page in ${lang}`);
      check(await tid(`user-delete-${args.username}`).isDisabled(), `deleting ${args.username} (the only admin, yourself) is offered in ${lang}`);
      check(await tid(`user-delete-${RBAC_USER}`).isEnabled(), `deleting ${RBAC_USER} is not offered in ${lang}`);
      await tid(`user-delete-why-${args.username}`).hover();
      const why = page.locator('.ant-tooltip:not(.ant-tooltip-hidden) .ant-tooltip-inner');
      await expectText(why, lang === 'en' ? /cannot delete yourself/ : /不能删除自己/, `why ${args.username} cannot be deleted, in ${lang}`);
      seen[lang] = { whyNotDelete: ((await why.first().textContent()) ?? '').trim() };
      await page.mouse.move(0, VIEWPORT.height - 1);
      await expectHidden(why, 'the tooltip');
      // The public namespace's locked actions say why on keyboard focus too
      await visit('#/namespaces', row('public'), `the namespaces page in ${lang}`);
      await tid('ns-delete-why-public').focus();
      await expectText(why, lang === 'en' ? /public namespace cannot be changed/ : /public 命名空间不能修改/, `why public cannot be deleted, on focus, in ${lang}`);
      await tid('ns-delete-why-public').blur();
      await expectHidden(why, 'the tooltip after focus moves on');
      // Cluster: the role in the console's language
      await visit('#/cluster', page.locator('[data-testid="cluster-table"] tbody tr.ant-table-row'), `the cluster page in ${lang}`);
      const role = ((await page.locator('[data-testid="cluster-table"] tbody [data-role]').first().textContent()) ?? '').trim();
      check(lang === 'en' ? role === 'leader' : role === '领导者', `the cluster page shows role ${JSON.stringify(role)} in ${lang}`);
      seen[lang].role = role;
    }
    check(misfits.length === 0, `not everything fits ${VIEWPORT.width} × ${VIEWPORT.height}: ${misfits.join(' | ')}`);
    // A server error in the Chinese console: a Chinese sentence, the server's text as detail.
    await visit('#/roles', row(`${ROLE}/${RBAC_USER}`), 'the roles page in zh');
    await tid('role-create').click();
    await expectVisible(tid('role-form-role'), 'the bind-role dialog');
    await tid('role-form-role').fill(ROLE);
    await pickRoleUser(RBAC_USER);
    const conflict = await submitForm('role-form');
    check(conflict && /冲突/.test(conflict) && /already bound/.test(conflict), `a 409 in the Chinese console reads ${JSON.stringify(conflict)}`);
    seen.zh.conflict = conflict;
    await shot('error-zh');
    await clickInDialog(tid('role-form-cancel'));
    await expectHidden(tid('role-form-form'), 'the bind-role dialog');
    await tid('lang-en').click();

    // The dry run becomes a real import, from the button beside its report.
    await visit('#/sync', row(TASK_DRY), 'the sync page');
    if ((await tid(`sync-apply-${TASK_DRY}`).count()) === 0) await row(TASK_DRY).locator('.ant-table-row-expand-icon').click();
    await tid(`sync-apply-${TASK_DRY}`).click();
    await expectText(tid('confirm-dialog'), /starts writing/, 'what applying the dry run does');
    const refused = await confirmInUi(`applying ${TASK_DRY}`);
    check(refused === null, `applying ${TASK_DRY} was refused: ${refused}`);
    await expectHidden(tid(`sync-dry-${TASK_DRY}`), `the dry-run mark of the applied ${TASK_DRY}`);
    check((await syncTask(TASK_DRY))?.dryRun === false, `the API still shows ${TASK_DRY} as a dry run`);
    // applied again (through the API, the page's copy is gone): the server's 409
    const again = await api('POST', `${taskPath(TASK_DRY)}/apply`, {}, { allowError: true });
    check(again.status === 409, `applying a real import: ${again.status} ${again.text}`);

    await api('DELETE', taskPath(TASK_DRY));
    await api('DELETE', '/nacos/v1/ns/instance', { namespaceId: NS, serviceName: SVC, ip: '127.0.0.2', port: PORT, ephemeral: false });
    await removeFaceInstances();
    return seen;
  });

  // The login page, in Chinese, in a context of its own (no session).
  await step('login-zh', async () => {
    const context = await browser.newContext({ viewport: VIEWPORT, locale: 'zh-CN' });
    const main = page;
    page = await context.newPage();
    try {
      await page.goto(BASE + '/');
      await expectVisible(tid('login-username'), 'the login form');
      await expectText(tid('login-first-password'), /initial-admin-password.*ROSTER_ADMIN_PASSWORD/, 'where the first password is, in Chinese');
      await expectFits('the login page in zh');
      await shot('login-zh');
    } finally {
      await context.close();
      page = main;
    }
    return {};
  });

  await step('non-admin', async () => {
    // As the admin, through the API: an instance in the namespace the user may only read.
    await api('POST', '/nacos/v1/ns/instance', { namespaceId: NS_RO, serviceName: SVC_RO, ip: '127.0.0.1', port: PORT, ephemeral: false });
    await logoutInUi();
    await loginInUi(RBAC_USER, RBAC_PASSWORD);

    // The menu: no admin pages; no admin mark.
    for (const id of ['nav-namespaces', 'nav-services', 'nav-cluster']) await expectVisible(tid(id), `menu item ${id}`);
    for (const id of ['nav-sync', 'nav-users', 'nav-roles', 'nav-permissions', 'nav-audit']) {
      check((await tid(id).count()) === 0, `a user who is not an admin sees menu item ${id}`);
    }
    check(!/admin/.test((await tid('current-user').textContent()) ?? ''), 'the header marks the user as an admin');

    // Namespaces: the two it may read, and no admin action.
    await expectVisible(row(NS), `namespace ${NS}`);
    await expectVisible(row(NS_RO), `namespace ${NS_RO}`);
    const listed = await page.locator('[data-testid="ns-table"] tbody tr.ant-table-row').count();
    check(listed === 2, `the namespaces page lists ${listed} namespaces, expected 2`);
    check((await tid('ns-create').count()) === 0, 'the create-namespace button is shown');
    check((await tid(`ns-delete-${NS}`).count()) === 0, 'a delete-namespace button is shown');
    await shot('non-admin-namespaces');

    // Services: the selector starts on a readable namespace and offers only the two.
    await tid('nav-services').click();
    await expectUrl(new RegExp(`#/services\\?namespaceId=(${NS}|${NS_RO})$`), 'the services menu');
    await tid('ns-switcher').click();
    await expectVisible(page.locator(`.ant-select-dropdown [data-testid="ns-switcher-option-${NS_RO}"]`), 'the namespace options');
    const offered = (
      await page.locator('.ant-select-dropdown [data-testid^="ns-switcher-option-"]').evaluateAll((els) => els.map((e) => e.getAttribute('data-testid')))
    )
      .map((id) => id.slice('ns-switcher-option-'.length))
      .sort();
    check(JSON.stringify(offered) === JSON.stringify([NS, NS_RO].sort()), `the namespace selector offers ${JSON.stringify(offered)}`);
    await page.locator(`.ant-select-dropdown [data-testid="ns-switcher-option-${NS_RO}"]`).click();
    await expectUrl(new RegExp(`#/services\\?namespaceId=${NS_RO}$`), 'switching to the read-only namespace');

    // Read-only: the service registered through the API shows; a write shows the refusal.
    await tid(`svc-link-${GROUP}-${SVC_RO}`).click();
    await expectVisible(row(ADDR), `instance ${ADDR} of ${SVC_RO}`);
    await tid(`inst-edit-${ADDR}`).click();
    await expectVisible(tid('inst-form-weight'), 'the edit-instance dialog');
    await tid('inst-form-weight').fill('5');
    const refusal = await submitForm('inst-form');
    check(refusal && /authorization failed/.test(refusal), `a write in the read-only namespace: expected the refusal, saw ${refusal}`);
    await shot('non-admin-refused');
    await clickInDialog(tid('inst-form-cancel'));
    await expectHidden(tid('inst-form-form'), 'the edit-instance dialog');
    const hosts = (await api('GET', '/nacos/v1/ns/instance/list', { namespaceId: NS_RO, serviceName: SVC_RO })).json?.hosts ?? [];
    check(hosts[0]?.weight === 1, `the refused edit changed the instance: ${JSON.stringify(hosts)}`);
    // The same user through the API: read yes, write no.
    const read = await apiAs(RBAC_USER, RBAC_PASSWORD, 'GET', '/nacos/v1/ns/catalog/services', { namespaceId: NS_RO, pageNo: 1, pageSize: 10 });
    check(read.status === 200, `the user's read of ${NS_RO} through the API answered ${read.status}`);
    const write = await apiAs(RBAC_USER, RBAC_PASSWORD, 'POST', '/nacos/v1/ns/instance', {
      namespaceId: NS_RO,
      serviceName: SVC_RO,
      ip: '127.0.0.2',
      port: PORT,
      ephemeral: false,
    });
    check(write.status === 403, `the user's registration in ${NS_RO} through the API answered ${write.status}: ${write.text}`);

    // Read-write: a service created and deleted in the UI.
    await tid('nav-services').click();
    await tid('ns-switcher').click();
    await page.locator(`.ant-select-dropdown [data-testid="ns-switcher-option-${NS}"]`).click();
    await expectUrl(new RegExp(`#/services\\?namespaceId=${NS}$`), 'switching to the read-write namespace');
    await tid('svc-create').click();
    await expectVisible(tid('svc-form-name'), 'the create-service dialog');
    await tid('svc-form-name').fill(SVC_USER);
    const createRefused = await submitForm('svc-form');
    check(createRefused === null, `creating ${SVC_USER} in ${NS} was refused: ${createRefused}`);
    await expectVisible(tid(`svc-link-${GROUP}-${SVC_USER}`), `service ${SVC_USER}`);
    await tid(`svc-delete-${GROUP}-${SVC_USER}`).click();
    const deleteRefused = await confirmInUi(`deleting ${SVC_USER}`);
    check(deleteRefused === null, `deleting ${SVC_USER} was refused: ${deleteRefused}`);
    await expectHidden(tid(`svc-link-${GROUP}-${SVC_USER}`), `service ${SVC_USER} deleted`);

    // Configurations: the selector offers the same two; a write in the read-only one is
    // refused in the dialog.
    await tid('nav-configs').click();
    await expectUrl(new RegExp(`#/configs\\?namespaceId=${NS}$`), 'the configurations menu');
    await tid('ns-switcher').click();
    await expectVisible(page.locator(`.ant-select-dropdown [data-testid="ns-switcher-option-${NS_RO}"]`), 'the namespace options');
    const cfgOffered = (
      await page.locator('.ant-select-dropdown [data-testid^="ns-switcher-option-"]').evaluateAll((els) => els.map((e) => e.getAttribute('data-testid')))
    )
      .map((id) => id.slice('ns-switcher-option-'.length))
      .sort();
    check(JSON.stringify(cfgOffered) === JSON.stringify([NS, NS_RO].sort()), `the configurations' namespace selector offers ${JSON.stringify(cfgOffered)}`);
    await page.locator(`.ant-select-dropdown [data-testid="ns-switcher-option-${NS_RO}"]`).click();
    await expectUrl(new RegExp(`#/configs\\?namespaceId=${NS_RO}$`), 'the configurations of the read-only namespace');
    await expectVisible(tid('empty-state'), `the configurations of ${NS_RO}`);
    await expectVisible(tid('cfg-export'), 'the export button');
    check((await tid('cfg-import-open').count()) === 0, 'the import button shows to a user who is not an admin');
    await tid('cfg-create').click();
    await expectVisible(tid('cfg-form-data-id'), 'the create-configuration dialog');
    await tid('cfg-form-data-id').fill(CFG);
    await tid('cfg-form-content').fill(CFG_V1);
    const cfgRefusal = await submitForm('cfg-form');
    check(cfgRefusal && /authorization failed/.test(cfgRefusal), `a configuration written in the read-only namespace: expected the refusal, saw ${cfgRefusal}`);
    await clickInDialog(tid('cfg-form-cancel'));
    await expectHidden(tid('cfg-editor'), 'the create-configuration dialog');
    const cfgWritten = await api('GET', '/nacos/v1/cs/configs', { dataId: CFG, group: GROUP, tenant: NS_RO }, { allowError: true });
    check(cfgWritten.status === 404, `the refused configuration exists in ${NS_RO}: ${cfgWritten.status}`);

    // A namespace without a grant: one clear 403, no retry loop, no stream.
    const seen = { list: 0, events: 0 };
    const count = (r) => {
      const p = new URL(r.url()).pathname;
      if (p === '/nacos/v1/ns/catalog/services') seen.list++;
      if (p === '/api/v1/events') seen.events++;
    };
    page.on('request', count);
    try {
      await page.evaluate(() => {
        window.location.hash = '#/services?namespaceId=public';
      });
      await expectVisible(tid('notice-forbidden'), 'the no-access notice of public');
      await expectText(tid('load-error'), /authorization failed/, 'the reason of the refusal');
      await page.waitForTimeout(3000);
    } finally {
      page.off('request', count);
    }
    check(seen.list === 1 && seen.events === 0, `a namespace without a grant: ${seen.list} list requests, ${seen.events} streams in 3 s`);
    // An admin page by its address.
    await page.evaluate(() => {
      window.location.hash = '#/audit';
    });
    await expectVisible(tid('admin-only'), 'the admin-only notice of the audit page');
    check((await tid('audit-table').count()) === 0, 'the audit page shows to a user who is not an admin');
    return { offered, refusal, apiWrite: write.status, configRefusal: cfgRefusal };
  });

  await step('revoke', async () => {
    await logoutInUi();
    await loginInUi(args.username, args.password);
    await tid('nav-permissions').click();
    await expectUrl(/#\/permissions$/, 'the permissions menu');
    await tid('perm-filter-role').fill(ROLE);
    for (const key of [`${ROLE}|${NS}:*:*|rw`, `${ROLE}|${NS_RO}:*:*|r`]) {
      await expectVisible(row(key), `permission ${key}`);
      await tid(`perm-revoke-${key}`).click();
      const refused = await confirmInUi(`revoking ${key}`);
      check(refused === null, `revoking ${key} was refused: ${refused}`);
      await expectHidden(row(key), `the revoked permission ${key}`);
    }
    const left = await permissionsOf(ROLE);
    check(left.length === 0, `the API still shows permissions of ${ROLE}: ${JSON.stringify(left)}`);

    await tid('nav-roles').click();
    await expectUrl(/#\/roles$/, 'the roles menu');
    // The last admin keeps ROLE_ADMIN: the server's 400, in the confirmation.
    await tid(`role-unbind-ROLE_ADMIN/${args.username}`).click();
    const lastAdmin = await confirmInUi(`unbinding ROLE_ADMIN from ${args.username}`);
    check(lastAdmin !== null, `the last admin lost ROLE_ADMIN`);
    await clickInDialog(tid('confirm-cancel'));
    await expectHidden(tid('confirm-dialog'), 'the confirmation');
    await tid(`role-unbind-${ROLE}/${RBAC_USER}`).click();
    const refused = await confirmInUi(`unbinding ${ROLE} from ${RBAC_USER}`);
    check(refused === null, `unbinding ${ROLE} was refused: ${refused}`);
    await expectHidden(row(`${ROLE}/${RBAC_USER}`), `the binding of ${ROLE}`);
    check((await holdersOf(ROLE)).length === 0, `the API still shows holders of ${ROLE}`);

    // What the API made goes the same way.
    await api('DELETE', '/nacos/v1/auth/users', { username: RBAC_USER });
    await removeReadOnlyNamespace();
    return { lastAdminRefusal: lastAdmin };
  });

  // Gray releases, in the configuration editor's gray release tab.
  await step('gray', async () => {
    await api('POST', '/nacos/v1/cs/configs', { dataId: CFG_GRAY, group: GROUP, tenant: NS, content: GRAY_FORMAL, type: 'properties' });
    await visit(`#/configs?namespaceId=${NS}`, row(CFG_GRAY_KEY), `configuration ${CFG_GRAY} in the list`);
    await openGrayTab();
    await expectVisible(tid('cfg-gray-beta-none'), 'the gray tab without a beta');
    await expectVisible(tid('cfg-gray-tags-none'), 'the gray tab without tag versions');

    // A tag version: the form checks the tag; a client carrying the tag reads it.
    await clickInDialog(tid('cfg-gray-publish-tag'));
    await expectVisible(tid('cfg-gray-form-tag'), 'the publish-to-tag form');
    const prefilled = await tid('cfg-gray-form-content').inputValue();
    check(prefilled === GRAY_FORMAL, `the publish-to-tag form starts from ${JSON.stringify(prefilled)}, not the formal content`);
    await tid('cfg-gray-form-tag').fill('bad tag!');
    await tid('cfg-gray-form-content').fill(GRAY_TAG);
    const badTag = await submitGrayForm();
    check(badTag && /1 to 64 letters/.test(badTag), `a bad tag: expected the form's refusal, saw ${badTag}`);
    await tid('cfg-gray-form-tag').fill('canary');
    await expectHidden(page.locator('[data-testid="cfg-gray-form"] .ant-form-item-explain-error'), 'the refusal of the tag, once fixed');
    let refused = await submitGrayForm();
    check(refused === null, `publishing to tag canary was refused: ${refused}`);
    await expectVisible(tid('cfg-gray-tag-canary'), 'the tag version canary');
    const tagShown = await tid('cfg-gray-tag-canary-content').textContent();
    check(tagShown === GRAY_TAG, `the tag version shows ${JSON.stringify(tagShown)}`);
    await expectGrayRead({ tag: 'canary' }, GRAY_TAG, 'the tag version');
    await expectGrayRead({}, GRAY_FORMAL, 'without a beta');

    // A beta for 127.0.0.1: the form checks the addresses; then the console and a client
    // at that address see it.
    await clickInDialog(tid('cfg-gray-publish-beta'));
    await expectVisible(tid('cfg-gray-form-ips'), 'the publish-beta form');
    await tid('cfg-gray-form-ips').fill('127.0.0.1, not-an-ip');
    await tid('cfg-gray-form-content').fill(GRAY_BETA);
    const badIp = await submitGrayForm();
    check(badIp && /"not-an-ip" is not an IP address/.test(badIp), `a bad address: expected the form's refusal, saw ${badIp}`);
    check((await grayBeta()) === null, 'a beta was published with a bad address');
    await tid('cfg-gray-form-ips').fill('127.0.0.1');
    await expectHidden(page.locator('[data-testid="cfg-gray-form"] .ant-form-item-explain-error'), 'the refusal of the addresses, once fixed');
    refused = await submitGrayForm();
    check(refused === null, `publishing the beta was refused: ${refused}`);
    await expectVisible(tid('cfg-gray-beta'), 'the beta');
    const ips = await page.locator('[data-testid="cfg-gray-beta"] [data-testid="cfg-gray-beta-ip"]').allTextContents();
    check(JSON.stringify(ips) === JSON.stringify(['127.0.0.1']), `the beta shows addresses ${JSON.stringify(ips)}`);
    const betaShown = await tid('cfg-gray-beta-content').textContent();
    check(betaShown === GRAY_BETA, `the beta shows ${JSON.stringify(betaShown)}`);
    const beta = await grayBeta();
    check(beta?.betaIps === '127.0.0.1' && beta.content === GRAY_BETA, `beta=true answers ${JSON.stringify(beta)}`);
    await expectGrayRead({}, GRAY_BETA, 'a client at 127.0.0.1 with the beta');
    check((await grayRead({ show: 'all' })).json?.content === GRAY_FORMAL, 'the formal content changed with the beta');
    await tid('cfg-gray-beta-show-diff').click();
    await expectVisible(tid('cfg-gray-beta-diff'), "the beta's changes");
    const betaDiff = await diffLinesOf('cfg-gray-beta-diff');
    const expectedDiff = JSON.stringify({ added: ['timeout=10', 'fast=true'], removed: ['timeout=30'] });
    check(JSON.stringify(betaDiff) === expectedDiff, `the beta's changes show ${JSON.stringify(betaDiff)}`);
    await shot('config-gray');
    await clickInDialog(tid('cfg-gray-close'));
    await expectHidden(tid('cfg-editor'), 'the editor');

    // 中文
    await tid('lang-zh').click();
    await expectText(tid('nav-configs'), '配置管理', 'the configurations menu item in Chinese');
    await page.mouse.move(0, 600);
    await openGrayTab();
    await expectText(tid('cfg-tab-gray'), '灰度发布', 'the gray release tab in Chinese');
    await expectText(tid('cfg-gray-beta-remove'), /停止 Beta/, 'the stop-beta button in Chinese');
    await expectVisible(tid('cfg-gray-tag-canary'), 'the tag version canary in Chinese');
    await shot('config-gray-zh');
    await clickInDialog(tid('cfg-gray-close'));
    await expectHidden(tid('cfg-editor'), 'the editor');
    await tid('lang-en').click();
    await expectText(tid('nav-configs'), 'Configurations', 'the configurations menu item back in English');

    // The tag version removed, through the confirmation.
    await openGrayTab();
    await tid('cfg-gray-tag-canary-remove').click();
    refused = await confirmInUi('removing the tag version canary');
    check(refused === null, `removing the tag version was refused: ${refused}`);
    await expectVisible(tid('cfg-gray-tags-none'), 'the gray tab once the tag version is removed');
    const removedTag = await grayHistory();
    check(removedTag[0] === 'D tag_canary', `the history after the removal: ${JSON.stringify(removedTag)}`);

    // The beta promoted: the diff first, then its content is the formal content, for
    // every client, and the beta is gone; the editor's content tab shows it.
    await tid('cfg-gray-beta-promote').click();
    await expectVisible(tid('cfg-gray-promote-diff'), 'the changes of the promotion');
    const promoteDiff = await diffLinesOf('cfg-gray-promote-diff');
    check(JSON.stringify(promoteDiff) === expectedDiff, `the promotion shows ${JSON.stringify(promoteDiff)}`);
    check((await grayRead({ show: 'all' })).json?.content === GRAY_FORMAL, 'the beta was promoted before it was confirmed');
    await shot('config-gray-promote');
    await clickInDialog(tid('cfg-gray-promote-ok'));
    await expectVisible(tid('cfg-gray-beta-none'), 'the gray tab once the beta is promoted');
    const formal = (await grayRead({ show: 'all' })).json;
    check(formal?.content === GRAY_BETA && formal.type === 'properties', `after the promotion the item is ${JSON.stringify(formal)}`);
    check((await grayBeta()) === null, 'the beta is still there after the promotion');
    await expectGrayRead({}, GRAY_BETA, 'after the promotion');
    await clickInDialog(tid('cfg-tab-content'));
    await expectEditorContent(GRAY_BETA, 'the content tab after the promotion');

    // Another beta, through the API, stopped in the UI: the client reads the formal again.
    await api('POST', '/nacos/v1/cs/configs', { dataId: CFG_GRAY, group: GROUP, tenant: NS, content: GRAY_FORMAL, betaIps: '127.0.0.1' });
    await expectGrayRead({}, GRAY_FORMAL, 'with the second beta');
    await clickInDialog(tid('cfg-tab-gray'));
    await expectVisible(tid('cfg-gray-beta'), 'the second beta');
    await tid('cfg-gray-beta-remove').click();
    await expectText(tid('confirm-dialog'), /127\.0\.0\.1 read the formal content again/, 'the confirmation to stop the beta');
    refused = await confirmInUi('stopping the beta');
    check(refused === null, `stopping the beta was refused: ${refused}`);
    await expectVisible(tid('cfg-gray-beta-none'), 'the gray tab once the beta is stopped');
    check((await grayBeta()) === null, 'the beta is still there after stopping it');
    await expectGrayRead({}, GRAY_BETA, 'once the beta is stopped');
    await clickInDialog(tid('cfg-gray-close'));
    await expectHidden(tid('cfg-editor'), 'the editor');

    // The history marks the gray versions; the current one is the promotion's. (An
    // earlier run against the same server left older versions.)
    const expectedHistory = ['D beta', 'I beta', 'D beta', 'U', 'D tag_canary', 'I beta', 'I tag_canary', 'I'];
    const apiHistory = (await grayHistory()).slice(0, expectedHistory.length);
    check(JSON.stringify(apiHistory) === JSON.stringify(expectedHistory), `the history API lists ${JSON.stringify(apiHistory)}`);
    await tid(`cfg-history-${CFG_GRAY_KEY}`).click();
    await expectVisible(tid('cfg-history-current'), 'the current version in the history');
    const marked = (await historyGrayRows()).slice(0, expectedHistory.length);
    const expectedMarks = expectedHistory.map((v) => (v === 'U' ? 'U current' : v));
    check(JSON.stringify(marked) === JSON.stringify(expectedMarks), `the history dialog shows ${JSON.stringify(marked)}`);
    await shot('config-gray-history');
    await clickInDialog(tid('cfg-history-close'));
    await expectHidden(tid('cfg-history'), 'the history dialog');

    await api('DELETE', '/nacos/v1/cs/configs', { dataId: CFG_GRAY, group: GROUP, tenant: NS });
    return { ips, betaDiff, history: marked };
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
      shotFile = await shot(`failure-${currentStep}`, { fits: false, a11y: false });
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
