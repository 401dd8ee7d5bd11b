#!/usr/bin/env node
// Subscribe with the unmodified npm `nacos-naming` client (HTTP v1 + UDP push) and print
// every host list roster pushes, for the black-box observer test (tests/it/observer.rs).
//
// Usage:
//   node observer.js --server 127.0.0.1:8848 --username nacos --password P \
//                    --watch NAMESPACE/SERVICE [--watch NAMESPACE/SERVICE ...] [--seconds 150]
//
// One SDK client per namespace subscribes to its services (cluster DEFAULT, the SDK's
// default). Prints one JSON object per line on stdout, each with `at_ms` (wall clock, ms):
//   {"kind":"push","namespace","service","clusters","hosts":[...],"protected":b}
//       a UDP `dom` packet as the SDK's PushReceiver received it (empty lists included:
//       the SDK acks those but, by design, does not hand them to listeners);
//   {"kind":"callback","namespace","service","hosts":[...]}   a listener call;
//   {"kind":"query","namespace","service"}   the SDK polled `/instance/list` itself (its
//       first query, a re-query 1 s later, then every cacheMillis = 10 s);
//   {"kind":"subscribed","namespace","service","hosts":[...]}, {"kind":"ready"},
//   {"kind":"error","reason"}.
// Hosts are {"ip","port","healthy","enabled"}. Runs until stdin closes or `--seconds`
// pass (a watchdog).
'use strict';

function parseArgs(argv) {
  const out = { watch: [], seconds: 150 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[++i];
    if (value === undefined) usage(`${flag} needs a value`);
    if (flag === '--server') out.server = value;
    else if (flag === '--username') out.username = value;
    else if (flag === '--password') out.password = value;
    else if (flag === '--watch') out.watch.push(value);
    else if (flag === '--seconds') out.seconds = Number(value);
    else usage(`unknown argument ${flag}`);
  }
  if (!out.server || !out.username || !out.password || out.watch.length === 0) {
    usage('--server, --username, --password and at least one --watch are required');
  }
  out.namespaces = new Map();
  for (const w of out.watch) {
    const slash = w.indexOf('/');
    if (slash <= 0 || slash === w.length - 1) usage(`--watch ${w}: want NAMESPACE/SERVICE`);
    const ns = w.slice(0, slash);
    if (!out.namespaces.has(ns)) out.namespaces.set(ns, []);
    out.namespaces.get(ns).push(w.slice(slash + 1));
  }
  return out;
}

function usage(msg) {
  process.stderr.write(`observer.js: ${msg}\n`);
  process.exit(64);
}

const args = parseArgs(process.argv.slice(2));

// The SDK announces `require('address').ip()` as `clientIP`, where roster sends pushes:
// pin it to loopback before the SDK loads, as sdk_flow.js does.
const address = require('address');
address.ip = () => '127.0.0.1';
const { NacosNamingClient } = require('nacos-naming');

function emit(kind, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ kind, at_ms: Date.now() }, fields || {})) + '\n');
}

function hostsOf(hosts) {
  return (hosts || []).map(h => ({ ip: h.ip, port: Number(h.port), healthy: h.healthy !== false, enabled: h.enabled !== false }));
}

function plainName(name) {
  const at = String(name).indexOf('@@');
  return at >= 0 ? name.slice(at + 2) : name;
}

let exiting = false;
function finish(code) {
  if (exiting) return;
  exiting = true;
  process.stdout.write('', () => process.exit(code));
  setTimeout(() => process.exit(code), 500).unref();
}

setTimeout(() => finish(0), args.seconds * 1000).unref();
process.stdin.on('end', () => finish(0));
process.stdin.on('error', () => finish(0));
process.stdin.resume();

// A logger for one namespace's client: quiet, except that it reports the UDP packets the
// SDK's PushReceiver logs ('[PushReceiver] received push data: %s from %s:%s').
function loggerFor(ns) {
  const fmt = a => require('util').format(...a);
  return {
    debug() {},
    info(...a) {
      if (typeof a[0] !== 'string' || !a[0].startsWith('[PushReceiver] received push data')) return;
      try {
        const packet = JSON.parse(a[1]);
        if (packet.type !== 'dom') return;
        const info = JSON.parse(packet.data);
        emit('push', {
          namespace: ns,
          service: plainName(info.name || info.dom),
          clusters: info.clusters,
          hosts: hostsOf(info.hosts),
          protected: info.reachProtectionThreshold === true,
        });
      } catch (e) {
        emit('error', { reason: `unreadable push: ${e.message}` });
      }
    },
    warn(...a) { process.stderr.write(`[sdk warn ${ns}] ${fmt(a)}\n`); },
    error(...a) { process.stderr.write(`[sdk error ${ns}] ${fmt(a)}\n`); },
  };
}

const withTimeout = (promise, ms, what) => Promise.race([
  promise,
  new Promise((_, reject) => setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms).unref()),
]);

async function main() {
  for (const [ ns, services ] of args.namespaces) {
    const client = new NacosNamingClient({
      logger: loggerFor(ns),
      serverList: args.server,
      namespace: ns,
      username: args.username,
      password: args.password,
    });
    client.on('error', err => emit('error', { reason: `sdk: ${err && err.message}` }));
    // Observe (not alter) the SDK's own queries, so the test can tell polls from pushes.
    const proxy = client._serverProxy;
    const queryList = proxy.queryList.bind(proxy);
    proxy.queryList = (serviceName, ...rest) => {
      emit('query', { namespace: ns, service: plainName(serviceName) });
      return queryList(serviceName, ...rest);
    };
    await withTimeout(client.ready(), 10000, 'client.ready()');
    for (const service of services) {
      let first = null;
      const listener = hosts => {
        emit('callback', { namespace: ns, service, hosts: hostsOf(hosts) });
        if (!first) first = hosts;
      };
      client.subscribe({ serviceName: service }, listener);
      // The first list arrives from the SDK's own query (which also subscribes to pushes).
      const deadline = Date.now() + 5000;
      while (!first && Date.now() < deadline) await new Promise(r => setTimeout(r, 20));
      emit('subscribed', { namespace: ns, service, hosts: hostsOf(first) });
    }
  }
  emit('ready');
}

main().catch(err => {
  emit('error', { reason: String(err && err.message) });
  finish(1);
});
