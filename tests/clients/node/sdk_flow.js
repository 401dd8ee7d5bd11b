#!/usr/bin/env node
// Drive the unmodified npm `nacos-naming` SDK (NacosNamingClient, HTTP v1 + UDP push)
// against a roster node and check what the SDK sees.
//
// Prints one JSON object per step on stdout ({"step": ..., "ok": true, ...}).
// Exit code 0 only if every check passed; otherwise the failing step is printed with
// "ok": false and a one-line reason goes to stderr.
//
// Usage:
//   node sdk_flow.js --server 127.0.0.1:8848 --username nacos --password P --service NAME
//                    [--namespace public] [--client-ip 127.0.0.1|auto] [--max-push-ms 4000]
//                    [--verbose]
'use strict';

const http = require('http');

// ---- arguments ------------------------------------------------------------------------
function parseArgs(argv) {
  const out = {
    namespace: 'public',
    clientIp: '127.0.0.1',
    maxPushMs: 4000,
    verbose: false,
  };
  const names = {
    '--server': 'server',
    '--username': 'username',
    '--password': 'password',
    '--service': 'service',
    '--namespace': 'namespace',
    '--client-ip': 'clientIp',
    '--max-push-ms': 'maxPushMs',
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--verbose') {
      out.verbose = true;
      continue;
    }
    const eq = a.indexOf('=');
    const flag = eq > 0 ? a.slice(0, eq) : a;
    if (!names[flag]) usage(`unknown argument ${a}`);
    const value = eq > 0 ? a.slice(eq + 1) : argv[++i];
    if (value === undefined) usage(`${flag} needs a value`);
    out[names[flag]] = value;
  }
  for (const req of [ 'server', 'username', 'password', 'service' ]) {
    if (!out[req]) usage(`--${req} is required`);
  }
  out.maxPushMs = Number(out.maxPushMs);
  if (!(out.maxPushMs > 0)) usage('--max-push-ms must be a positive number');
  return out;
}

function usage(msg) {
  process.stderr.write(`sdk_flow.js: ${msg}\n` +
    'usage: node sdk_flow.js --server HOST:PORT --username U --password P --service NAME ' +
    '[--namespace public] [--client-ip 127.0.0.1|auto] [--max-push-ms 4000] [--verbose]\n');
  process.exit(64);
}

const args = parseArgs(process.argv.slice(2));

// The SDK announces `require('address').ip()` (first ethN address) as `clientIP`, the
// address roster pushes to. Pin it to loopback by default so pushes stay on 127.0.0.1
// whatever interfaces the test machine has; `--client-ip auto` keeps the SDK's own choice.
// This must happen before nacos-naming is loaded (it reads the address at load time).
const address = require('address');
if (args.clientIp !== 'auto') {
  const pinned = args.clientIp;
  address.ip = () => pinned;
}
const announcedIp = address.ip();

const { NacosNamingClient } = require('nacos-naming');

// ---- output ---------------------------------------------------------------------------
let currentStep = 'start';

function emit(step, ok, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ step, ok }, fields || {})) + '\n');
}

class CheckFailed extends Error {
  constructor(message, details) {
    super(message);
    this.details = details || {};
  }
}

function fail(message, details) {
  throw new CheckFailed(message, details);
}

let exiting = false;
function finish(code) {
  if (exiting) return;
  exiting = true;
  // Force the exit: SDK timers/sockets must not keep the process alive.
  process.stdout.write('', () => process.exit(code));
  setTimeout(() => process.exit(code), 500).unref();
}

const WATCHDOG_MS = 60000;
setTimeout(() => {
  emit(currentStep, false, { error: `run exceeded ${WATCHDOG_MS} ms (watchdog)` });
  process.stderr.write(`FAIL ${currentStep}: run exceeded ${WATCHDOG_MS} ms (watchdog)\n`);
  finish(3);
}, WATCHDOG_MS);

// ---- SDK logger: quiet, but records UDP pushes the SDK's PushReceiver logs ----------------
const pushLog = []; // { at, data: ServiceInfo JSON string }
const sdkProblems = [];
function fmt(parts) {
  return require('util').format(...parts);
}
const logger = {
  debug(...a) { if (args.verbose) process.stderr.write(`[sdk debug] ${fmt(a)}\n`); },
  info(...a) {
    // PushReceiver: logger.info('[PushReceiver] received push data: %s from %s:%s', jsonStr, ip, port)
    if (typeof a[0] === 'string' && a[0].startsWith('[PushReceiver] received push data')) {
      try {
        const packet = JSON.parse(a[1]);
        if (packet.type === 'dom') pushLog.push({ at: Date.now(), data: packet.data, from: `${a[2]}:${a[3]}` });
      } catch (_) { /* not JSON: ignore */ }
    }
    if (args.verbose) process.stderr.write(`[sdk info] ${fmt(a)}\n`);
  },
  warn(...a) {
    sdkProblems.push(fmt(a));
    process.stderr.write(`[sdk warn] ${fmt(a)}\n`);
  },
  error(...a) {
    sdkProblems.push(fmt(a));
    process.stderr.write(`[sdk error] ${fmt(a)}\n`);
  },
};

// ---- helpers --------------------------------------------------------------------------
const sleep = ms => new Promise(r => setTimeout(r, ms));

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new CheckFailed(`${what} did not finish within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function hasHost(hosts, inst) {
  return Array.isArray(hosts) && hosts.some(h => h.ip === inst.ip && Number(h.port) === inst.port);
}

function summary(hosts) {
  return (hosts || []).map(h => `${h.ip}:${h.port}${h.healthy === false ? '(unhealthy)' : ''}`);
}

// Listener calls, in order, with the time they arrived.
const calls = [];
let callWaiters = [];
function listener(hosts) {
  calls.push({ at: Date.now(), hosts });
  const waiters = callWaiters;
  callWaiters = [];
  for (const w of waiters) w();
}

// Resolve with the first listener call (index >= since) whose hosts satisfy pred.
async function waitForCall(since, pred, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (let i = since; i < calls.length; i++) {
      if (pred(calls[i].hosts)) return calls[i];
    }
    const left = deadline - Date.now();
    if (left <= 0) return null;
    await new Promise(resolve => {
      const t = setTimeout(resolve, left);
      callWaiters.push(() => { clearTimeout(t); resolve(); });
    });
  }
}

// A UDP push received since `sinceMs` for the subscribed key (clusters DEFAULT, the
// SDK's default for subscribe) whose hosts satisfy pred.
function pushSeen(sinceMs, pred) {
  return pushLog.find(p => {
    if (p.at < sinceMs) return false;
    try {
      const info = JSON.parse(p.data);
      return info.clusters === 'DEFAULT' && pred(info.hosts);
    } catch (_) {
      return false;
    }
  });
}

// Plain HTTP read (not through the SDK), used only where the SDK cannot report an empty
// list (it ignores empty host lists by design).
function rawList(service) {
  const [ host, port ] = args.server.split(':');
  const qs = new URLSearchParams({
    serviceName: service,
    groupName: 'DEFAULT_GROUP',
    namespaceId: args.namespace,
    username: args.username,
    password: args.password,
  });
  return new Promise((resolve, reject) => {
    const req = http.get({ host, port: Number(port), path: `/nacos/v1/ns/instance/list?${qs}`, timeout: 3000 }, res => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', c => { body += c; });
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${body}`));
        try {
          resolve(JSON.parse(body));
        } catch (e) {
          reject(e);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

// ---- the flow -------------------------------------------------------------------------
const INST1 = { ip: '127.30.0.1', port: 8080 };
const INST2 = { ip: '127.30.0.2', port: 8081 };

async function flow(client, registered) {
  const service = args.service;

  currentStep = 'ready';
  await withTimeout(client.ready(), 10000, 'client.ready()');
  emit('ready', true, { client_ip: announcedIp, sdk_version: require('nacos-naming/package.json').version });

  currentStep = 'server_status';
  const status = await withTimeout(client.getServerStatus(), 10000, 'getServerStatus()');
  if (status !== 'UP') fail(`getServerStatus() = ${status}, want UP`);
  emit('server_status', true, { status });

  currentStep = 'register';
  await withTimeout(client.registerInstance(service, {
    ip: INST1.ip, port: INST1.port, metadata: { sdk: 'node', role: 'first' },
  }), 10000, 'registerInstance');
  registered.add(INST1);
  const all = await withTimeout(client.getAllInstances(service), 10000, 'getAllInstances');
  if (!hasHost(all, INST1)) fail('getAllInstances does not show the registered instance', { hosts: all });
  const h1 = all.find(h => h.ip === INST1.ip && h.port === INST1.port);
  if (h1.healthy !== true || h1.enabled !== true) fail('registered instance not healthy+enabled', { host: h1 });
  if (!h1.metadata || h1.metadata.sdk !== 'node') fail('metadata not returned', { host: h1 });
  emit('register', true, { instance: INST1, hosts: summary(all) });

  currentStep = 'subscribe';
  const subscribedAt = Date.now();
  client.subscribe({ serviceName: service }, listener);
  const first = await waitForCall(0, hosts => hasHost(hosts, INST1), 5000);
  if (!first) fail('listener never received the initial host list', { calls: calls.map(c => summary(c.hosts)) });
  // The SDK re-queries 1 s after subscribing, then every cacheMillis (10 s). Let that first
  // re-query pass so the next change can only reach us by UDP push within the window.
  await sleep(Math.max(0, subscribedAt + 1800 - Date.now()));
  emit('subscribe', true, { initial_hosts: summary(first.hosts), after_ms: first.at - subscribedAt });

  currentStep = 'push_added';
  let mark = calls.length;
  let t0 = Date.now();
  await withTimeout(client.registerInstance(service, {
    ip: INST2.ip, port: INST2.port, metadata: { sdk: 'node', role: 'second' },
  }), 10000, 'registerInstance (second)');
  registered.add(INST2);
  const added = await waitForCall(mark, hosts => hasHost(hosts, INST2) && hasHost(hosts, INST1), args.maxPushMs);
  if (!added) {
    fail(`listener did not get the second instance within ${args.maxPushMs} ms (UDP push missing?)`,
      { calls: calls.slice(mark).map(c => summary(c.hosts)), pushes: pushLog.length });
  }
  const addLatency = added.at - t0;
  const addPush = pushSeen(t0, hosts => hasHost(hosts, INST2));
  if (!addPush) fail('the new host list did not arrive by UDP push (no push packet carried it)');
  emit('push_added', true, { latency_ms: addLatency, via: 'udp', push_from: addPush.from, hosts: summary(added.hosts) });

  currentStep = 'push_removed';
  mark = calls.length;
  t0 = Date.now();
  await withTimeout(client.deregisterInstance(service, { ip: INST2.ip, port: INST2.port }), 10000,
    'deregisterInstance (second)');
  registered.delete(INST2);
  const removed = await waitForCall(mark, hosts => !hasHost(hosts, INST2) && hasHost(hosts, INST1), args.maxPushMs);
  if (!removed) {
    fail(`listener did not get a list without the second instance within ${args.maxPushMs} ms`,
      { calls: calls.slice(mark).map(c => summary(c.hosts)) });
  }
  const removeLatency = removed.at - t0;
  const removePush = pushSeen(t0, hosts => Array.isArray(hosts) && !hasHost(hosts, INST2) && hasHost(hosts, INST1));
  if (!removePush) fail('the shrunk host list did not arrive by UDP push');
  emit('push_removed', true, { latency_ms: removeLatency, via: 'udp', hosts: summary(removed.hosts) });

  currentStep = 'deregister';
  t0 = Date.now();
  await withTimeout(client.deregisterInstance(service, { ip: INST1.ip, port: INST1.port }), 10000,
    'deregisterInstance (first)');
  registered.delete(INST1);
  // The server pushes the now-empty list too (the SDK acks it, then ignores it by design).
  // Wait for it, so the client is not closed before acking it.
  let emptyPush = null;
  const pushDeadline = t0 + args.maxPushMs;
  while (!(emptyPush = pushSeen(t0, hosts => Array.isArray(hosts) && hosts.length === 0))) {
    if (Date.now() >= pushDeadline) fail(`no UDP push of the empty host list within ${args.maxPushMs} ms`);
    await sleep(20);
  }
  // The SDK drops empty host lists, so confirm the empty service with a plain HTTP read.
  let res;
  const deadline = Date.now() + 3000;
  for (;;) {
    res = await rawList(service);
    if (Array.isArray(res.hosts) && res.hosts.length === 0) break;
    if (Date.now() >= deadline) fail('service still has hosts after deregistering both', { hosts: summary(res.hosts) });
    await sleep(200);
  }
  emit('deregister', true, { hosts: 0, empty_push_ms: emptyPush.at - t0 });

  currentStep = 'close';
  client.unSubscribe({ serviceName: service }, listener);
  await withTimeout(client.close(), 5000, 'client.close()');
  emit('close', true, { pushes_received: pushLog.length, add_latency_ms: addLatency, remove_latency_ms: removeLatency });
}

async function main() {
  const client = new NacosNamingClient({
    logger,
    serverList: args.server,
    namespace: args.namespace,
    username: args.username,
    password: args.password,
  });
  // HostReactor/PushReceiver errors surface on the client through sdk-base; record them.
  client.on('error', err => {
    sdkProblems.push(String(err && err.message));
    process.stderr.write(`[sdk error event] ${err && err.message}\n`);
  });
  const registered = new Set();
  try {
    await flow(client, registered);
    emit('done', true, {});
    finish(0);
  } catch (err) {
    const details = err instanceof CheckFailed ? err.details : {};
    const message = err instanceof CheckFailed ? err.message : `unexpected ${err && err.name}: ${err && err.message}`;
    emit(currentStep, false, Object.assign({ error: message }, details));
    process.stderr.write(`FAIL ${currentStep}: ${message}\n`);
    // Best effort: leave nothing registered behind.
    for (const inst of registered) {
      try {
        await withTimeout(client.deregisterInstance(args.service, inst), 3000, 'cleanup');
      } catch (_) { /* ignore */ }
    }
    finish(1);
  }
}

main();
