#!/usr/bin/env node
// Browser test of roster's console against a cluster: the overview's live charts, each
// member's own view on the cluster page, and the console carrying on through another
// member when the node that served it is killed.
//
//   node tests/console/console_cluster.mjs --servers H:P1,H:P2,H:P3 --username nacos --password P \
//        --service NAME --shots DIR [--watchdog 180] [--chromium /usr/bin/chromium]
//
// The console is opened at the first server. The test asks whoever runs it to kill and
// restart that node: it prints `{"want":"kill","node":1}` (or "start") on stdout and
// waits for one line on stdin, which the runner writes once it is done (the Rust test
// `console_cluster` does this; by hand, kill the node and press Enter). Prints one JSON
// line per step on stdout. Exit codes as console_flow.mjs: 0 passed, 1 a check failed,
// 2 an unexpected error, 3 the watchdog fired.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { axeProblems, fitProblems } from './checks.mjs';

function parseArgs(argv) {
  const out = { watchdog: 180, chromium: process.env.CHROMIUM || '/usr/bin/chromium', password: process.env.ROSTER_PASSWORD };
  for (let i = 2; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, '');
    const value = argv[++i];
    if (value === undefined) usage(`--${key} needs a value`);
    out[key] = key === 'watchdog' ? Number(value) : value;
  }
  for (const k of ['servers', 'username', 'password', 'service', 'shots']) if (!out[k]) usage(`--${k} is required`);
  out.servers = out.servers.split(',');
  if (out.servers.length < 2) usage('--servers needs at least two members');
  return out;
}

function usage(msg) {
  console.error(`${msg}\nusage: console_cluster.mjs --servers H:P1,H:P2,H:P3 --username U --password P --service NAME --shots DIR`);
  process.exit(2);
}

const args = parseArgs(process.argv);
const HOME = `http://${args.servers[0]}`;
const OTHER = `http://${args.servers[1]}`;
const SVC = args.service;
const GROUP = 'DEFAULT_GROUP';
const VIEWPORT = { width: 1366, height: 768 };
const ACTION_MS = 10_000;
/** The overview samples every 5 s: a new point is due within two intervals. */
const POINT_MS = 15_000;
fs.mkdirSync(args.shots, { recursive: true });

class CheckFailed extends Error {}

let browser = null;
let page = null;
let currentStep = 'setup';
const pageErrors = [];
const started = Date.now();

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function check(cond, reason) {
  if (!cond) throw new CheckFailed(reason);
}

const watchdog = setTimeout(() => {
  console.error(`FAIL ${currentStep}: watchdog: the run took longer than ${args.watchdog} s`);
  emit({ step: currentStep, ok: false, error: 'watchdog', elapsedMs: Date.now() - started });
  setTimeout(() => process.exit(3), 3000).unref();
  browser?.close().finally(() => process.exit(3));
}, args.watchdog * 1000);
watchdog.unref();

async function step(name, fn) {
  currentStep = name;
  const t0 = Date.now();
  const detail = (await fn()) ?? {};
  if (pageErrors.length) throw new CheckFailed(`uncaught error in the page: ${pageErrors[0]}`);
  emit({ step: name, ok: true, ms: Date.now() - t0, ...detail });
}

/** A screenshot, after checking the page fits 1366 × 768 and passes axe's serious rules. */
async function shot(name) {
  const fits = await fitProblems(page);
  check(fits.length === 0, `the page of screenshot ${name} does not fit ${VIEWPORT.width} × ${VIEWPORT.height}: ${fits.join('; ')}`);
  const a11y = await axeProblems(page);
  check(a11y.length === 0, `the page of screenshot ${name} has accessibility violations: ${a11y.join(' | ')}`);
  await page.screenshot({
    path: path.join(args.shots, `${name}.png`),
    fullPage: true,
    animations: 'disabled',
    timeout: ACTION_MS,
    style: '.ant-message { display: none !important; }',
  });
}

// ------------------------------------------------------------------ the runner

const stdin = readline.createInterface({ input: process.stdin });
const answers = stdin[Symbol.asyncIterator]();

/** Asks the runner to kill or start node `node` and waits until it says it is done. */
async function want(what, node) {
  emit({ want: what, node });
  const { value, done } = await answers.next();
  check(!done, `the runner closed stdin instead of doing "${what}" on node ${node}`);
  return value;
}

// ------------------------------------------------------------------ the API, directly

let apiToken = null;

async function api(base, method, p, params = {}) {
  const qs = new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)]));
  let url = base + p;
  let body;
  if (method === 'GET' || method === 'DELETE') url += (qs.size ? '?' : '') + qs;
  else body = qs;
  const headers = apiToken ? { Authorization: `Bearer ${apiToken}` } : {};
  const res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(ACTION_MS) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p} -> ${res.status}: ${text}`);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

// ------------------------------------------------------------------ the page

const tid = (id) => page.locator(`[data-testid="${id}"]`);

async function expectVisible(locator, what, timeout = ACTION_MS) {
  try {
    await locator.first().waitFor({ state: 'visible', timeout });
  } catch {
    throw new CheckFailed(`${what}: not visible within ${timeout} ms`);
  }
}

async function expectHidden(locator, what, timeout = ACTION_MS) {
  try {
    await locator.first().waitFor({ state: 'hidden', timeout });
  } catch {
    throw new CheckFailed(`${what}: still visible after ${timeout} ms`);
  }
}

/** Waits until `read()` satisfies `ok`; answers the last value read. */
async function until(read, ok, what, timeout = ACTION_MS) {
  const deadline = Date.now() + timeout;
  let last;
  while (Date.now() < deadline) {
    last = await read().catch(() => undefined);
    if (ok(last)) return last;
    await page.waitForTimeout(200);
  }
  throw new CheckFailed(`${what}: last seen ${JSON.stringify(last)} after ${timeout} ms`);
}

const attr = (id, name) => () => tid(id).first().getAttribute(name);
const points = (key) => async () => Number(await tid(`chart-${key}`).first().getAttribute('data-points'));

async function language(lang) {
  await tid(`lang-${lang}`).click();
  await until(() => page.evaluate(() => localStorage.getItem('roster.console.lang')), (l) => l === lang, `language ${lang}`);
}

// ------------------------------------------------------------------ the steps

async function main() {
  await step('prepare', async () => {
    const login = await api(HOME, 'POST', '/nacos/v1/auth/login', { username: args.username, password: args.password });
    apiToken = login.accessToken;
    // a persistent instance, probed at the second member's HTTP port (alive throughout)
    const port = Number(args.servers[1].split(':').pop());
    await api(HOME, 'POST', '/nacos/v1/ns/instance', { serviceName: SVC, ip: '127.0.0.1', port, ephemeral: false });
    browser = await chromium.launch({ executablePath: args.chromium, args: ['--no-sandbox'] });
    const context = await browser.newContext({ viewport: VIEWPORT, locale: 'en-US' });
    page = await context.newPage();
    page.setDefaultTimeout(ACTION_MS);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    return { browser: browser.version() };
  });

  await step('overview', async () => {
    await page.goto(HOME + '/');
    await expectVisible(tid('login-username'), 'the login form');
    await tid('login-username').fill(args.username);
    await tid('login-password').fill(args.password);
    await tid('login-submit').click();
    await until(async () => page.url(), (u) => /#\/overview$/.test(u), 'the landing page after login');
    await expectVisible(tid('overview-summary'), 'the overview figures');
    await until(attr('endpoint-node', 'data-node'), (n) => n === '1', 'the header names node 1');
    for (const key of ['instances', 'writes', 'requests', 'latency', 'pushes', 'raft', 'guard', 'sync']) {
      await expectVisible(tid(`chart-${key}`), `the ${key} chart`);
    }
    // the summary is the node as it is once ready (a leader in its term), not the
    // start-up sample; the time axis spans the node's 15-minute window, even with few
    // samples (uPlot's own range around one sample spans years)
    await until(() => tid('overview-state').innerText(), (t) => /^(leader|follower)$/i.test((t ?? '').trim()), 'a voter\'s role in the summary');
    await until(() => tid('overview-summary').innerText(), (t) => !/no leader/i.test(t ?? ''), 'a leader in the summary');
    for (const key of ['instances', 'raft']) {
      const span = await until(
        async () => {
          const [min, max] = [await attr(`chart-${key}`, 'data-x-min')(), await attr(`chart-${key}`, 'data-x-max')()];
          return Number(max) - Number(min);
        },
        (s) => Number.isFinite(s) && s > 0,
        `the ${key} chart's time axis`,
      );
      if (Math.abs(span - 900) > 1) throw new Error(`the ${key} chart's time axis spans ${span} s, not the 900 s window`);
    }
    // new points arrive while the page is open, without a reload
    const before = await points('instances')();
    const after = await until(points('instances'), (n) => n > before, 'a new point on the instances chart', POINT_MS);
    // the instance registered in `prepare` is counted (the summary reads the newest sample)
    await until(() => tid('overview-summary').innerText(), (t) => /Instances\s*\n?\s*[1-9]/.test(t ?? ''), 'the instance count');
    await shot('overview');
    await language('zh');
    await expectVisible(page.getByText('概览').first(), 'the overview in Chinese');
    await shot('overview-zh');
    await language('en');
    return { pointsBefore: before, pointsAfter: after };
  });

  await step('cluster-views', async () => {
    await tid('nav-cluster').click();
    for (let id = 1; id <= args.servers.length; id++) {
      const view = tid(`member-view-${id}`);
      const seen = async () => `${await view.getAttribute('data-reachable')} ${(await view.getAttribute('data-error')) ?? ''}`.trim();
      await until(seen, (v) => v === 'true', `node ${id}'s own view`);
    }
    const terms = [];
    for (let id = 1; id <= args.servers.length; id++) terms.push(await tid(`member-view-${id}`).getAttribute('data-term'));
    check(terms.every((t) => t === terms[0]), `the members report different terms: ${terms}`);
    await shot('cluster-views');
    return { terms };
  });

  await step('clients-all-members', async () => {
    // Address clients of several IPs, registered through node 1 and replicated: every
    // member lists what it holds, and "all members" is every member's answer, each row
    // tagged with the member that gave it.
    const ips = [1, 2, 3, 4].map((i) => `127.0.31.${i}`);
    for (const ip of ips) {
      await api(HOME, 'POST', '/nacos/v1/ns/instance', { serviceName: `${SVC}-clients`, ip, port: 8080, ephemeral: true });
    }
    const listed = async () => {
      const rows = [];
      for (const server of args.servers) {
        const answer = await api(`http://${server}`, 'GET', '/api/v1/clients', { ip: '127.0.31.' });
        for (const c of answer.clients) rows.push(`${c.clientId}@${answer.node}`);
      }
      return rows.sort();
    };
    const all = await until(listed, (rows) => rows.length === ips.length * args.servers.length, 'every member listing every address client');
    const shown = () =>
      page
        .locator('[data-testid="clients-table"] [data-testid="client-row"]')
        .evaluateAll((rows) => rows.map((r) => `${r.getAttribute('data-client')}@${r.getAttribute('data-node') ?? ''}`).sort());
    await tid('nav-clients').click();
    await tid('clients-search').fill('127.0.31.');
    const mine = all.filter((r) => r.endsWith('@1'));
    await until(shown, (rows) => JSON.stringify(rows) === JSON.stringify(mine), "node 1's clients");
    await tid('clients-scope-all').click();
    await until(shown, (rows) => JSON.stringify(rows) === JSON.stringify(all), "every member's clients");
    // the Node column, read until it shows every member (the page refreshes itself:
    // a read during a refresh can see the table between renders)
    const column = async () =>
      [...new Set(await page.locator('[data-testid="clients-table"] [data-testid="client-node"]').allInnerTexts())].sort().join();
    const members = args.servers.map((_, i) => i + 1).join();
    await until(column, (nodes) => nodes === members, 'the node column naming every member');
    await shot('clients-all-members');
    await tid('clients-scope-node').click();
    await tid('nav-cluster').click();
    await expectVisible(tid('cluster-updated'), 'the cluster page again');
    return { rows: all.length };
  });

  await step('failover', async () => {
    const updated = await tid('cluster-updated').innerText();
    await want('kill', 1);
    const t0 = Date.now();
    // the cluster page's next refresh gets no answer: the console moves to another member
    await expectVisible(tid('endpoint-banner'), 'the banner saying the console moved', 20_000);
    const movedMs = Date.now() - t0;
    const now = await until(attr('endpoint-node', 'data-node'), (n) => n && n !== '1', 'the header names the new node');
    // and carries on: the page refreshes, and node 1's own view says it cannot be reached
    await until(() => tid('cluster-updated').innerText(), (u) => u !== updated, 'the cluster page refreshing after the move');
    await until(attr('member-view-1', 'data-reachable'), (v) => v === 'false', "node 1's own view");
    await shot('failover');
    // the other pages work through the new node: the services list, the overview
    await tid('nav-services').click();
    await expectVisible(tid(`svc-link-${GROUP}-${SVC}`), 'the service, listed through the new node');
    await tid('nav-overview').click();
    await expectVisible(tid('overview-summary'), 'the overview of the new node');
    const subtitle = await tid('overview-page').innerText();
    check(subtitle.includes(`node ${now}`), `the overview does not say it shows node ${now}: ${subtitle.slice(0, 200)}`);
    await until(points('instances'), (n) => n > 0, "the new node's chart");
    await language('zh');
    await shot('failover-zh');
    await language('en');
    return { movedMs, node: Number(now) };
  });

  await step('switch-back', async () => {
    await want('start', 1);
    // it stays on the member it moved to until asked
    const node = await tid('endpoint-node').getAttribute('data-node');
    await page.waitForTimeout(3000);
    check((await tid('endpoint-node').getAttribute('data-node')) === node, 'the console moved back without being asked');
    await expectVisible(tid('endpoint-banner'), 'the banner, while away');
    await tid('endpoint-back').click();
    await expectHidden(tid('endpoint-banner'), 'the banner after switching back');
    await until(attr('endpoint-node', 'data-node'), (n) => n === '1', 'the header names node 1 again');
    await tid('nav-cluster').click();
    await until(attr('member-view-1', 'data-reachable'), (v) => v === 'true', "node 1's own view after its restart", 20_000);
    // the instance is still there, read from node 1
    const list = await api(HOME, 'GET', '/nacos/v1/ns/instance/list', { serviceName: SVC });
    check((list.hosts ?? []).length === 1, `node 1 lists ${JSON.stringify(list.hosts)}`);
    return {};
  });
}

try {
  await main();
  await api(OTHER, 'DELETE', '/nacos/v1/ns/instance', {
    serviceName: SVC,
    ip: '127.0.0.1',
    port: Number(args.servers[1].split(':').pop()),
    ephemeral: false,
  });
  await browser?.close();
  process.exit(0);
} catch (e) {
  const failed = e instanceof CheckFailed;
  console.error(`FAIL ${currentStep}: ${failed ? e.message : e.stack ?? e}`);
  if (page) {
    console.error(`page: ${page.url()}`);
    await page.screenshot({ path: path.join(args.shots, `failure-${currentStep}.png`), fullPage: true }).catch(() => {});
  }
  emit({ step: currentStep, ok: false, error: String(e.message ?? e) });
  await browser?.close().catch(() => {});
  process.exit(failed ? 1 : 2);
}
