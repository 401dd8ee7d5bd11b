#!/usr/bin/env python3
"""Drive the unmodified nacos-sdk-python 3.x gRPC client (asyncio, package `v2.nacos`)
against a roster node and check every answer the SDK gets back.

Prints one JSON object per step on stdout ({"step": ..., "ok": true, ...}).
Exit code 0 only if every check passed; otherwise the failing step is printed with
"ok": false, a `FAIL <step>: <reason>` line goes to stderr, followed by the tail of the
SDK's own log (which records every payload it received on the bi-stream).

Usage:
  grpc_flow.py --server 127.0.0.1:8848 --username nacos --password P --service NAME
               [--namespace public] [--max-push-ms 5000] [--watchdog-seconds 90]

The SDK is given the HTTP address; it logs in over HTTP and talks gRPC to port + 1000.
Cross-protocol checks use roster's HTTP v1 API directly (urllib, username/password params).
"""

import argparse
import asyncio
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from v2.nacos import (BatchRegisterInstanceParam, ClientConfigBuilder,
                      DeregisterInstanceParam, GRPCConfig, ListInstanceParam,
                      ListServiceParam, NacosException, NacosNamingService,
                      RegisterInstanceParam,
                      SubscribeServiceParam, TLSConfig)
from v2.nacos import __version__ as SDK_VERSION

GROUP = "DEFAULT_GROUP"
CLUSTER = "DEFAULT"

# Service A: registered over gRPC by the SDK, then a second instance over HTTP v1.
INST1 = {"ip": "127.70.0.1", "port": 8080,
         "metadata": {"sdk": "nacos-sdk-python-3", "role": "grpc-registered"}}
INST2 = {"ip": "127.70.0.2", "port": 8081,
         "metadata": {"role": "http-registered"}}
# Service B: batch-registered.
BATCH = [
    {"ip": "127.70.0.11", "port": 9001, "metadata": {"batch": "1"}},
    {"ip": "127.70.0.12", "port": 9002, "metadata": {"batch": "2"}},
]
# Offered by a client without credentials; must be refused.
ANON = {"ip": "127.70.0.9", "port": 8089}
# Service C: held until shutdown; roster must drop it when the connection closes.
LINGER = {"ip": "127.70.0.3", "port": 8082, "metadata": {"role": "dies-with-connection"}}

CONNECT_TIMEOUT_S = 15  # create_naming_service: login + channel + server check + setup ack (<= 5 s)
CALL_TIMEOUT_S = 8  # any single SDK call
HTTP_TIMEOUT_S = 5  # any single HTTP v1 call
GONE_WAIT_S = 5  # bounded poll of the HTTP list for instances that must disappear

# SDK log lines that mean roster sent something the SDK could not handle, or the stream broke.
# Checked for everything logged before shutdown.
SDK_LOG_PROBLEMS = [
    r"handle server request occur exception",
    r"unsupported payload type",
    r"bi stream broken",
    r"connection is unregistered",
    r"server healthy check fail",
    r"health check failed",
    r"failed to process server request",
    r"failed to send response",
    r"connect to server fail",
    r"failed to connect server",
    r"send request fail",
    r"Invalid response",
    r"validation error",
]


class CheckFailed(Exception):
    def __init__(self, step, message, **details):
        super().__init__(message)
        self.step = step
        self.details = details


def emit(step, ok=True, **fields):
    record = {"step": step, "ok": ok}
    record.update(fields)
    sys.stdout.write(json.dumps(record, default=str) + "\n")
    sys.stdout.flush()


def hard_exit(code):
    sys.stdout.flush()
    sys.stderr.flush()
    # grpc.aio and the SDK's background tasks may still hold the loop; leave at once.
    os._exit(code)


def inst_key(ip, port):
    return f"{ip}:{int(port)}"


def sdk_host_dict(inst):
    """An SDK `Instance` (pydantic) as a plain dict."""
    return {
        "instanceId": inst.instanceId, "ip": inst.ip, "port": inst.port, "weight": inst.weight,
        "healthy": inst.healthy, "enabled": inst.enabled, "ephemeral": inst.ephemeral,
        "clusterName": inst.clusterName, "serviceName": inst.serviceName,
        "metadata": dict(inst.metadata or {}),
    }


def find(hosts, spec):
    for h in hosts or []:
        if h.get("ip") == spec["ip"] and int(h.get("port", -1)) == spec["port"]:
            return h
    return None


def keys_of(hosts):
    return sorted(inst_key(h.get("ip"), h.get("port", -1)) for h in hosts or [])


def check_host(step, host, spec, service, where):
    """The fields a Nacos 2.x server reports for a registered ephemeral instance."""
    if host is None:
        raise CheckFailed(step, f"{inst_key(spec['ip'], spec['port'])} missing from {where}")
    problems = []
    for k, v in spec.get("metadata", {}).items():
        if (host.get("metadata") or {}).get(k) != v:
            problems.append(f"metadata[{k!r}]={((host.get('metadata') or {}).get(k))!r}, want {v!r}")
    expect = {"healthy": True, "enabled": True, "ephemeral": True, "clusterName": CLUSTER,
              "weight": 1.0}
    for k, v in expect.items():
        if host.get(k) != v:
            problems.append(f"{k}={host.get(k)!r}, want {v!r}")
    want_sn = f"{GROUP}@@{service}"
    if host.get("serviceName") not in (want_sn, service):
        problems.append(f"serviceName={host.get('serviceName')!r}, want {want_sn!r}")
    if not host.get("instanceId"):
        problems.append("instanceId empty")
    if problems:
        raise CheckFailed(step, f"{inst_key(spec['ip'], spec['port'])} in {where}: "
                          + "; ".join(problems), host=host)


class HttpV1:
    """Plain HTTP v1 calls to roster (not through the SDK)."""

    def __init__(self, server, username, password, namespace):
        self.base = "http://" + server + "/nacos/v1"
        self.auth = {"username": username, "password": password}
        self.namespace = namespace

    def _call(self, method, path, params):
        q = dict(params)
        q.update(self.auth)
        if self.namespace and self.namespace != "public":
            q["namespaceId"] = self.namespace
        url = self.base + path + "?" + urllib.parse.urlencode(q)
        req = urllib.request.Request(url, method=method, data=b"" if method != "GET" else None)
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
                return resp.status, resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")

    async def call(self, method, path, params):
        return await asyncio.wait_for(asyncio.to_thread(self._call, method, path, params),
                                      HTTP_TIMEOUT_S + 1)

    async def register(self, service, spec):
        return await self.call("POST", "/ns/instance", {
            "serviceName": service, "groupName": GROUP, "ip": spec["ip"], "port": spec["port"],
            "clusterName": CLUSTER, "ephemeral": "true",
            "metadata": json.dumps(spec.get("metadata", {}))})

    async def deregister(self, service, spec):
        return await self.call("DELETE", "/ns/instance", {
            "serviceName": service, "groupName": GROUP, "ip": spec["ip"], "port": spec["port"],
            "clusterName": CLUSTER, "ephemeral": "true"})

    async def hosts(self, step, service):
        status, body = await self.call("GET", "/ns/instance/list",
                                       {"serviceName": service, "groupName": GROUP})
        if status != 200:
            raise CheckFailed(step, f"HTTP v1 list of {service} answered {status}: {body[:300]}")
        try:
            return json.loads(body).get("hosts") or []
        except ValueError:
            raise CheckFailed(step, f"HTTP v1 list of {service} is not JSON: {body[:300]}")

    async def wait_gone(self, step, service, specs, timeout=GONE_WAIT_S):
        deadline = time.monotonic() + timeout
        while True:
            hosts = await self.hosts(step, service)
            left = [s for s in specs if find(hosts, s) is not None]
            if not left:
                return hosts
            if time.monotonic() >= deadline:
                raise CheckFailed(step, f"still listed over HTTP v1 after {timeout}s in {service}: "
                                  + ", ".join(inst_key(s["ip"], s["port"]) for s in left),
                                  hosts=keys_of(hosts))
            await asyncio.sleep(0.2)


class PushLog:
    """Records every instance list the SDK hands to the subscribe callback."""

    def __init__(self):
        self.calls = []  # (monotonic time, [host dicts])
        self.changed = asyncio.Event()

    async def callback(self, instances):
        self.calls.append((time.monotonic(), [sdk_host_dict(i) for i in instances or []]))
        self.changed.set()

    async def wait_for(self, pred, deadline):
        """First call at index >= 0 whose host list satisfies pred; None on timeout."""
        seen = 0
        while True:
            for t, hosts in self.calls[seen:]:
                if pred(hosts):
                    return t, hosts
            seen = len(self.calls)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass


def count_log(log_path, needle):
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            return sum(1 for line in f if needle in line)
    except OSError:
        return 0


def log_problems(log_path, upto_bytes=None):
    try:
        with open(log_path, "rb") as f:
            data = f.read() if upto_bytes is None else f.read(upto_bytes)
    except OSError:
        return []
    found = []
    pat = re.compile("|".join(SDK_LOG_PROBLEMS), re.IGNORECASE)
    for line in data.decode("utf-8", "replace").splitlines():
        if pat.search(line):
            found.append(line[:600])
    return found


def tail(path, n=40):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readlines()[-n:]
    except OSError:
        return []


async def call(step, what, coro, timeout=CALL_TIMEOUT_S):
    try:
        return await asyncio.wait_for(coro, timeout)
    except asyncio.TimeoutError:
        raise CheckFailed(step, f"{what} did not return within {timeout}s")
    except CheckFailed:
        raise
    except Exception as e:  # NacosException carries the server's errorCode/message
        raise CheckFailed(step, f"{what} raised {type(e).__name__}: {e}")


async def flow(args, state):
    ns = args.namespace
    svc_a = args.service
    svc_b = args.service + "-batch"
    svc_c = args.service + "-linger"
    http = HttpV1(args.server, args.username, args.password, ns)
    log_path = os.path.join(state["tmp"], "logs", "naming.log")
    state["log_path"] = log_path

    # ---- connect: login over HTTP, gRPC channel, ServerCheck, ConnectionSetup (+ SetupAck) ----
    step = "connect"
    cfg = (ClientConfigBuilder()
           .server_address(args.server)
           .namespace_id(ns)
           .username(args.username)
           .password(args.password)
           .log_dir(os.path.join(state["tmp"], "logs"))
           .cache_dir(os.path.join(state["tmp"], "cache"))
           .log_level(logging.DEBUG)
           .load_cache_at_start(False)
           .grpc_config(GRPCConfig(grpc_timeout=5000)))
    if args.tls_ca:
        # gRPC over TLS; the SDK also insists on a client certificate and key to offer.
        cfg = cfg.tls_config(TLSConfig(enabled=True, ca_file=args.tls_ca,
                                       cert_file=args.tls_cert, key_file=args.tls_key))
    cfg = cfg.build()
    t0 = time.monotonic()
    naming = await call(step, "NacosNamingService.create_naming_service",
                        NacosNamingService.create_naming_service(cfg), CONNECT_TIMEOUT_S)
    state["naming"] = naming
    # create_naming_service does not raise when every connect attempt failed (it falls back
    # to async reconnect), so ask the client whether it is running.
    deadline = time.monotonic() + 5
    while not await naming.server_health():
        if time.monotonic() >= deadline:
            raise CheckFailed(step, "SDK gRPC client is not RUNNING after create_naming_service "
                              "(connect/ServerCheck/SetupAck failed; see SDK log)")
        await asyncio.sleep(0.1)
    rpc = naming.grpc_client_proxy.rpc_client
    conn = rpc.current_connection
    emit(step, sdk_version=SDK_VERSION, connect_ms=round((time.monotonic() - t0) * 1000),
         connection_id=conn.get_connection_id() if conn else None,
         grpc_port=conn.server_info.server_port if conn else None)

    # ---- register one ephemeral instance over gRPC ----
    step = "register"
    ok = await call(step, "register_instance", naming.register_instance(RegisterInstanceParam(
        service_name=svc_a, group_name=GROUP, ip=INST1["ip"], port=INST1["port"],
        cluster_name=CLUSTER, metadata=dict(INST1["metadata"]), ephemeral=True)))
    if ok is not True:
        raise CheckFailed(step, f"register_instance returned {ok!r}, want True")
    emit(step, service=svc_a, instance=inst_key(INST1["ip"], INST1["port"]))

    # ---- a second SDK client without credentials must be refused over gRPC (403) ----
    step = "auth_required"
    anon_cfg = (ClientConfigBuilder()
                .server_address(args.server)
                .namespace_id(ns)
                .log_dir(os.path.join(state["tmp"], "logs-anon"))
                .cache_dir(os.path.join(state["tmp"], "cache-anon"))
                .log_level(logging.DEBUG)  # the SDK's logger is shared per process
                .load_cache_at_start(False)
                .grpc_config(GRPCConfig(grpc_timeout=5000)))
    if args.tls_ca:
        anon_cfg = anon_cfg.tls_config(TLSConfig(enabled=True, ca_file=args.tls_ca,
                                                 cert_file=args.tls_cert, key_file=args.tls_key))
    anon_cfg = anon_cfg.build()
    anon = await call(step, "create_naming_service (no credentials)",
                      NacosNamingService.create_naming_service(anon_cfg), CONNECT_TIMEOUT_S)
    state["anon"] = anon
    try:
        refused = None
        try:
            ok = await asyncio.wait_for(anon.register_instance(RegisterInstanceParam(
                service_name=svc_a, group_name=GROUP, ip=ANON["ip"], port=ANON["port"],
                cluster_name=CLUSTER)), CALL_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise CheckFailed(step, f"unauthenticated register_instance did not return within "
                              f"{CALL_TIMEOUT_S}s")
        except NacosException as e:
            refused = e
        if refused is None:
            raise CheckFailed(step, f"register_instance without an accessToken succeeded ({ok!r}); "
                              "roster must answer errorCode 403")
        if refused.error_code != 403:
            raise CheckFailed(step, f"unauthenticated register_instance failed with errorCode "
                              f"{refused.error_code!r} ({refused.message}), want 403")
    finally:
        try:
            await asyncio.wait_for(anon.shutdown(), 5)
        except Exception:
            pass
        state["anon"] = None
    if find(await http.hosts(step, svc_a), ANON) is not None:
        raise CheckFailed(step, f"refused instance {inst_key(ANON['ip'], ANON['port'])} is listed")
    emit(step, error_code=refused.error_code, message=refused.message)

    # ---- list it back through the SDK (SubscribeServiceRequest / SubscribeServiceResponse) ----
    step = "list"
    instances = await call(step, "list_instances", naming.list_instances(ListInstanceParam(
        service_name=svc_a, group_name=GROUP, healthy_only=None, subscribe=True)))
    hosts = [sdk_host_dict(i) for i in instances]
    check_host(step, find(hosts, INST1), INST1, svc_a, "SDK list_instances")
    if len(hosts) != 1:
        raise CheckFailed(step, f"list_instances returned {keys_of(hosts)}, want only INST1")
    # the same instance seen through HTTP v1 (cross-protocol)
    hhosts = await http.hosts(step, svc_a)
    check_host(step, find(hhosts, INST1), INST1, svc_a, "HTTP v1 list")
    emit(step, sdk_hosts=keys_of(hosts), http_hosts=keys_of(hhosts),
         instance_id=find(hosts, INST1)["instanceId"])

    # ---- subscribe, then add an instance over HTTP v1: the change must be pushed over gRPC ----
    step = "subscribe"
    pushes = PushLog()
    await call(step, "subscribe", naming.subscribe(SubscribeServiceParam(
        service_name=svc_a, group_name=GROUP, subscribe_callback=pushes.callback)))
    emit(step, service=svc_a)

    step = "push_added"
    notify_before = count_log(log_path, "NotifySubscriberRequest")
    t_send = time.monotonic()
    status, body = await http.register(svc_a, INST2)
    t_http_done = time.monotonic()
    if status != 200 or body.strip() != "ok":
        raise CheckFailed(step, f"HTTP v1 register of {inst_key(INST2['ip'], INST2['port'])} "
                          f"answered {status}: {body[:300]}")
    got = await pushes.wait_for(
        lambda hs: find(hs, INST2) is not None and find(hs, INST1) is not None,
        t_send + args.max_push_ms / 1000.0)
    if got is None:
        raise CheckFailed(step, f"subscribe callback did not receive a list with "
                          f"{inst_key(INST2['ip'], INST2['port'])} within {args.max_push_ms} ms "
                          f"of the HTTP register (callback calls: "
                          f"{[keys_of(h) for _, h in pushes.calls]}; NotifySubscriberRequest "
                          f"payloads logged since subscribe: "
                          f"{count_log(log_path, 'NotifySubscriberRequest') - notify_before})")
    t_cb, cb_hosts = got
    check_host(step, find(cb_hosts, INST2), INST2, svc_a, "pushed list")
    check_host(step, find(cb_hosts, INST1), INST1, svc_a, "pushed list")
    notify_seen = count_log(log_path, "NotifySubscriberRequest") - notify_before
    if notify_seen <= 0:
        raise CheckFailed(step, "callback fired but no NotifySubscriberRequest was logged by the SDK")
    emit(step, latency_ms=round((t_cb - t_send) * 1000, 1),
         latency_after_http_ok_ms=round((t_cb - t_http_done) * 1000, 1),
         pushed_hosts=keys_of(cb_hosts), notify_payloads=notify_seen)

    # ---- batch register two instances in another service ----
    step = "batch_register"
    ok = await call(step, "batch_register_instances", naming.batch_register_instances(
        BatchRegisterInstanceParam(service_name=svc_b, group_name=GROUP, instances=[
            RegisterInstanceParam(service_name=svc_b, group_name=GROUP, ip=b["ip"], port=b["port"],
                                  cluster_name=CLUSTER, metadata=dict(b["metadata"]))
            for b in BATCH])))
    if ok is not True:
        raise CheckFailed(step, f"batch_register_instances returned {ok!r}, want True")
    instances = await call(step, "list_instances", naming.list_instances(ListInstanceParam(
        service_name=svc_b, group_name=GROUP, healthy_only=None, subscribe=True)))
    hosts = [sdk_host_dict(i) for i in instances]
    for b in BATCH:
        check_host(step, find(hosts, b), b, svc_b, "SDK list_instances")
    if len(hosts) != len(BATCH):
        raise CheckFailed(step, f"list_instances returned {keys_of(hosts)}, want {len(BATCH)} hosts")
    hhosts = await http.hosts(step, svc_b)
    for b in BATCH:
        check_host(step, find(hhosts, b), b, svc_b, "HTTP v1 list")
    emit(step, service=svc_b, sdk_hosts=keys_of(hosts), http_hosts=keys_of(hhosts))

    # ---- one more instance in a third service, kept until shutdown ----
    step = "register_linger"
    ok = await call(step, "register_instance", naming.register_instance(RegisterInstanceParam(
        service_name=svc_c, group_name=GROUP, ip=LINGER["ip"], port=LINGER["port"],
        cluster_name=CLUSTER, metadata=dict(LINGER["metadata"]))))
    if ok is not True:
        raise CheckFailed(step, f"register_instance returned {ok!r}, want True")
    check_host(step, find(await http.hosts(step, svc_c), LINGER), LINGER, svc_c, "HTTP v1 list")
    emit(step, service=svc_c, instance=inst_key(LINGER["ip"], LINGER["port"]))

    # ---- service list (ServiceListRequest / ServiceListResponse) ----
    step = "list_services"
    page_size = 500
    names, count, page = [], None, 1
    while True:
        sl = await call(step, "list_services", naming.list_services(ListServiceParam(
            namespace_id=ns, group_name=GROUP, page_no=page, page_size=page_size)))
        if not isinstance(sl.count, int) or not isinstance(sl.services, list):
            raise CheckFailed(step, f"bad ServiceList: {sl!r}")
        count = sl.count
        names.extend(sl.services)
        if len(sl.services) < page_size or len(names) >= count or page >= 20:
            break
        page += 1
    missing = [s for s in (svc_a, svc_b, svc_c) if s not in names]
    if missing:
        raise CheckFailed(step, f"service list lacks {missing} (count={count}, "
                          f"names={names[:50]})")
    grouped = [n for n in names if "@@" in n]
    if grouped:
        raise CheckFailed(step, f"service list must hold plain names, got grouped {grouped[:5]}")
    if count < len(set(names)):
        raise CheckFailed(step, f"count={count} < {len(set(names))} names listed")
    emit(step, count=count, found=[svc_a, svc_b, svc_c])

    # ---- deregister through the SDK; HTTP v1 must no longer list them ----
    step = "deregister"
    ok = await call(step, "deregister_instance", naming.deregister_instance(DeregisterInstanceParam(
        service_name=svc_a, group_name=GROUP, ip=INST1["ip"], port=INST1["port"],
        cluster_name=CLUSTER, ephemeral=True)))
    if ok is not True:
        raise CheckFailed(step, f"deregister_instance returned {ok!r}, want True")
    hosts_a = await http.wait_gone(step, svc_a, [INST1])
    if find(hosts_a, INST2) is None:
        raise CheckFailed(step, f"HTTP-registered {inst_key(INST2['ip'], INST2['port'])} vanished "
                          f"with the SDK deregister: {keys_of(hosts_a)}")
    # the subscriber is told too (list still holds INST2, so the SDK does not skip it as empty)
    got = await pushes.wait_for(
        lambda hs: find(hs, INST1) is None and find(hs, INST2) is not None,
        time.monotonic() + args.max_push_ms / 1000.0)
    if got is None:
        raise CheckFailed(step, f"subscribe callback did not receive a list without "
                          f"{inst_key(INST1['ip'], INST1['port'])} within {args.max_push_ms} ms")

    # batch deregister: the SDK re-sends BatchInstanceRequest with the instances it keeps,
    # first one left, then none (an empty batch)
    ok = await call(step, "batch_deregister_instances(first)", naming.batch_deregister_instances(
        BatchRegisterInstanceParam(service_name=svc_b, group_name=GROUP, instances=[
            RegisterInstanceParam(service_name=svc_b, ip=BATCH[0]["ip"], port=BATCH[0]["port"],
                                  cluster_name=CLUSTER)])))
    if ok is not True:
        raise CheckFailed(step, f"batch_deregister_instances returned {ok!r}, want True")
    hosts_b = await http.wait_gone(step, svc_b, [BATCH[0]])
    if find(hosts_b, BATCH[1]) is None:
        raise CheckFailed(step, f"batch_deregister of {inst_key(BATCH[0]['ip'], BATCH[0]['port'])} "
                          f"also removed {inst_key(BATCH[1]['ip'], BATCH[1]['port'])}: "
                          f"{keys_of(hosts_b)}")
    ok = await call(step, "batch_deregister_instances(second)", naming.batch_deregister_instances(
        BatchRegisterInstanceParam(service_name=svc_b, group_name=GROUP, instances=[
            RegisterInstanceParam(service_name=svc_b, ip=BATCH[1]["ip"], port=BATCH[1]["port"],
                                  cluster_name=CLUSTER)])))
    if ok is not True:
        raise CheckFailed(step, f"batch_deregister_instances returned {ok!r}, want True")
    hosts_b = await http.wait_gone(step, svc_b, BATCH)
    emit(step, http_hosts_a=keys_of(hosts_a), http_hosts_b=keys_of(hosts_b))

    # ---- everything the SDK logged so far must be clean ----
    step = "sdk_log"
    problems = log_problems(log_path)
    if problems:
        raise CheckFailed(step, f"SDK logged {len(problems)} problem line(s); first: {problems[0]}",
                          lines=problems[:10])
    # Not failures: "out of date data received" is logged when the SDK re-processes its own
    # cached ServiceInfo (subscribe() after list_instances()) or when a push overtakes the
    # unary SubscribeServiceResponse; the SDK keeps the newer data either way.
    emit(step, notify_payloads_total=count_log(log_path, "NotifySubscriberRequest"),
         out_of_date_warnings=count_log(log_path, "out of date data received"))

    # ---- shutdown: the connection closes and roster drops what it still held ----
    step = "shutdown"
    await call(step, "shutdown", naming.shutdown(), 5)
    state["naming"] = None
    if not rpc.is_shutdown():
        raise CheckFailed(step, "rpc client not SHUTDOWN after shutdown()")
    t_shut = time.monotonic()
    await http.wait_gone(step, svc_c, [LINGER])
    emit(step, linger_removed_ms=round((time.monotonic() - t_shut) * 1000))

    # tidy the HTTP-registered instance (no client beats it; it would expire anyway)
    await http.deregister(svc_a, INST2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True, help="roster HTTP address host:port")
    ap.add_argument("--username", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--service", required=True)
    ap.add_argument("--namespace", default="public")
    ap.add_argument("--max-push-ms", type=int, default=5000)
    ap.add_argument("--watchdog-seconds", type=float, default=90)
    ap.add_argument("--keep-tmp", action="store_true", help="keep the SDK log/cache dir")
    ap.add_argument("--tls-ca", help="speak gRPC over TLS, trusting this CA (PEM)")
    ap.add_argument("--tls-cert", help="with --tls-ca: the client certificate (PEM) the SDK requires")
    ap.add_argument("--tls-key", help="with --tls-ca: its key (PEM)")
    args = ap.parse_args()
    if args.tls_ca and not (args.tls_cert and args.tls_key):
        ap.error("--tls-ca needs --tls-cert and --tls-key (the SDK requires a client certificate)")

    state = {"tmp": tempfile.mkdtemp(prefix="roster-py3-"), "naming": None, "log_path": None}

    def cleanup_tmp():
        if not args.keep_tmp:
            shutil.rmtree(state["tmp"], ignore_errors=True)

    def dump_sdk_log():
        lines = tail(state["log_path"]) if state["log_path"] else []
        if lines:
            sys.stderr.write(f"--- last {len(lines)} lines of the SDK log ({state['log_path']}"
                             f"{'' if args.keep_tmp else ', removed on exit; --keep-tmp keeps it'})"
                             f" ---\n")
            for line in lines:
                sys.stderr.write(line if len(line) < 2000 else line[:2000] + "…\n")

    def watchdog():
        emit("watchdog", ok=False, reason=f"whole run exceeded {args.watchdog_seconds}s")
        sys.stderr.write(f"FAIL watchdog: whole run exceeded {args.watchdog_seconds}s\n")
        dump_sdk_log()
        cleanup_tmp()
        hard_exit(3)

    timer = threading.Timer(args.watchdog_seconds, watchdog)
    timer.daemon = True
    timer.start()

    async def runner():
        def quiet_handler(loop, context):
            # e.g. the SDK's fire-and-forget login task failing with a wrong password; the
            # failure surfaces again in the step that needs the token.
            exc = context.get("exception")
            sys.stderr.write(f"note: SDK background task: {context.get('message')}"
                             f"{': ' + repr(exc) if exc else ''}\n")
        asyncio.get_running_loop().set_exception_handler(quiet_handler)
        try:
            await flow(args, state)
            return 0
        except CheckFailed as e:
            emit(e.step, ok=False, reason=str(e), **e.details)
            sys.stderr.write(f"FAIL {e.step}: {e}\n")
            dump_sdk_log()
            return 1
        except Exception as e:  # a bug in this script or an unexpected SDK error
            emit("error", ok=False, reason=f"{type(e).__name__}: {e}")
            sys.stderr.write(f"FAIL error: {type(e).__name__}: {e}\n")
            dump_sdk_log()
            return 2
        finally:
            for k in ("naming", "anon"):  # failed mid-way: still close the connections
                if state.get(k) is not None:
                    try:
                        await asyncio.wait_for(state[k].shutdown(), 3)
                    except Exception:
                        pass

    async def run_and_exit():
        code = await runner()
        if code == 0:
            emit("done")
        timer.cancel()
        cleanup_tmp()
        # exit from inside the loop: asyncio.run's teardown would wait on the SDK's tasks
        hard_exit(code)

    asyncio.run(run_and_exit())
    hard_exit(2)


if __name__ == "__main__":
    main()
