#!/usr/bin/env python3
"""Subscribe with the unmodified nacos-sdk-python 3.x gRPC client and print every host list
roster pushes, for the black-box observer test (tests/it/observer.rs).

Usage:
  observer.py --server 127.0.0.1:8848 --username nacos --password P \
              --watch NAMESPACE/SERVICE [--watch NAMESPACE/SERVICE ...] [--seconds 150]

One SDK client per namespace subscribes to its services (group DEFAULT_GROUP, every
cluster). Prints one JSON object per line on stdout, each with `at_ms` (wall clock, ms):
- `{"kind":"subscribed","namespace","service","hosts":[...]}`: `subscribe` returned;
- `{"kind":"push","namespace","service","hosts":[...],"protected":b,"last_ref_time":n}`:
  a `NotifySubscriberRequest` as the SDK's push handler received it over the bi-stream,
  empty lists included (the SDK's cache skips those, by design);
- `{"kind":"callback","namespace","service","hosts":[...]}`: a list the SDK handed to
  the subscribe callback;
- `{"kind":"query","namespace","service"}`: the SDK asked the server itself
  (`query_instance_of_service`: its poller, off unless `async_update_service`). The
  observer test requires none, so every list it reads here came by push;
- `{"kind":"ready"}` once every subscription is in place, `{"kind":"error","reason"}`.
Hosts are `{"ip","port","healthy","enabled"}`. Runs until stdin closes or `--seconds`
pass (a watchdog: the test normally closes stdin), then exits without a goodbye to the
server.
"""

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
import time

from v2.nacos import (ClientConfigBuilder, GRPCConfig, NacosNamingService,
                      SubscribeServiceParam)
from v2.nacos.naming.model.naming_request import NotifySubscriberRequest
from v2.nacos.naming.remote import naming_grpc_client_proxy as proxy_module
from v2.nacos.naming.remote import naming_push_request_handler as push_module

GROUP = "DEFAULT_GROUP"
CONNECT_TIMEOUT_S = 15
CALL_TIMEOUT_S = 8

# The namespace of each SDK client, by the identity of its service-info cache (the push
# handler and the proxy both hold it).
NAMESPACE_OF_CACHE = {}


def now_ms():
    return int(time.time() * 1000)


def emit(kind, **fields):
    record = {"kind": kind, "at_ms": now_ms()}
    record.update(fields)
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def hosts_of(instances):
    return [{"ip": i.ip, "port": int(i.port), "healthy": bool(i.healthy),
             "enabled": bool(i.enabled)} for i in instances or []]


def plain_name(name):
    return name.split("@@", 1)[1] if "@@" in name else name


# Observe (not alter) the SDK: wrap its push handler and its query call.
_original_reply = push_module.NamingPushRequestHandler.request_reply


async def _observed_reply(self, request):
    if isinstance(request, NotifySubscriberRequest) and request.serviceInfo is not None:
        info = request.serviceInfo
        emit("push", namespace=NAMESPACE_OF_CACHE.get(id(self.service_info_cache), "?"),
             service=plain_name(info.name), hosts=hosts_of(info.hosts),
             protected=bool(info.reachProtectionThreshold), last_ref_time=info.lastRefTime)
    return await _original_reply(self, request)


push_module.NamingPushRequestHandler.request_reply = _observed_reply

_original_query = proxy_module.NamingGRPCClientProxy.query_instance_of_service


async def _observed_query(self, service_name, group_name, clusters, health_only):
    emit("query", namespace=self.namespace_id, service=service_name)
    return await _original_query(self, service_name, group_name, clusters, health_only)


proxy_module.NamingGRPCClientProxy.query_instance_of_service = _observed_query


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", required=True, help="roster's HTTP address (gRPC is port + 1000)")
    p.add_argument("--username", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--watch", action="append", required=True, metavar="NAMESPACE/SERVICE")
    p.add_argument("--seconds", type=float, default=150.0, help="watchdog: exit after this long")
    args = p.parse_args()
    watches = {}
    for w in args.watch:
        ns, _, svc = w.partition("/")
        if not ns or not svc:
            p.error(f"--watch {w!r}: want NAMESPACE/SERVICE")
        watches.setdefault(ns, []).append(svc)
    args.watches = watches
    return args


async def stdin_closed():
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)


async def subscribe_all(args, tmp):
    clients = []
    for ns, services in args.watches.items():
        cfg = (ClientConfigBuilder()
               .server_address(args.server)
               .namespace_id(ns)
               .username(args.username)
               .password(args.password)
               .log_dir(os.path.join(tmp, "logs", ns))
               .cache_dir(os.path.join(tmp, "cache", ns))
               .log_level(logging.INFO)
               .load_cache_at_start(False)
               .grpc_config(GRPCConfig(grpc_timeout=5000))
               .build())
        naming = await asyncio.wait_for(NacosNamingService.create_naming_service(cfg),
                                        CONNECT_TIMEOUT_S)
        NAMESPACE_OF_CACHE[id(naming.service_info_holder)] = ns
        deadline = time.monotonic() + 5
        while not await naming.server_health():
            if time.monotonic() >= deadline:
                raise RuntimeError(f"SDK client for namespace {ns} is not RUNNING")
            await asyncio.sleep(0.1)
        clients.append(naming)
        for svc in services:
            async def callback(instances, ns=ns, svc=svc):
                emit("callback", namespace=ns, service=svc, hosts=hosts_of(instances))
            await asyncio.wait_for(naming.subscribe(SubscribeServiceParam(
                service_name=svc, group_name=GROUP, subscribe_callback=callback)), CALL_TIMEOUT_S)
            info = await naming.service_info_holder.get_service_info(svc, GROUP, "")
            emit("subscribed", namespace=ns, service=svc,
                 hosts=hosts_of(info.hosts if info else []))
    return clients


async def main(args):
    tmp = tempfile.mkdtemp(prefix="roster-py3-observer-")
    code = 0
    try:
        clients = await subscribe_all(args, tmp)  # held until exit
        emit("ready", clients=len(clients))
        await asyncio.wait(
            [asyncio.ensure_future(stdin_closed()), asyncio.ensure_future(asyncio.sleep(args.seconds))],
            return_when=asyncio.FIRST_COMPLETED)
    except Exception as e:  # the test reads the reason; the SDK log is in tmp
        emit("error", reason=f"{type(e).__name__}: {e}")
        code = 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return code


if __name__ == "__main__":
    # grpc.aio and the SDK's background tasks may hold the loop open: leave at once.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    code = loop.run_until_complete(main(parse_args()))
    sys.stdout.flush()
    os._exit(code)
