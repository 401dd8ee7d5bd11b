#!/usr/bin/env python3
"""Drive the unmodified nacos-sdk-python 3.x gRPC client (`v2.nacos`) as a user who is
not an admin, in several namespaces, and report what roster allowed.

The script does not judge: for each namespace and operation it prints one JSON line
{"op": ..., "namespace": ..., "allowed": true|false, "code": <errorCode>, "detail": ...},
and the Rust test (tests/it/authz.rs) compares them with the user's permissions. It
exits 0 when every operation was tried (allowed or refused); 2 on an unexpected error;
3 on its watchdog.

Operations, in each namespace given with --namespaces (one SDK client per namespace):
  connect        create_naming_service (login over HTTP, gRPC to port + 1000)
  register       register_instance (ephemeral, over the connection)
  list           list_instances(subscribe=False) (a SubscribeServiceRequest)
  subscribe      subscribe with a callback (SubscribeServiceRequest)
  push           where subscribe was allowed: the admin registers one more instance over
                 plain HTTP (--admin-password); allowed when the callback gets a list
                 holding it within --push-seconds
  list_services  list_services (ServiceListRequest): the names it answers
  deregister     deregister_instance of the instance registered above

Usage:
  authz_flow.py --server 127.0.0.1:8848 --username ann --password P --admin-password AP
                --service NAME --namespaces ns-a,ns-b,ns-c [--ip-prefix 127.71]
"""

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from v2.nacos import (ClientConfigBuilder, DeregisterInstanceParam, GRPCConfig,
                      ListInstanceParam, ListServiceParam, NacosException,
                      NacosNamingService, RegisterInstanceParam, SubscribeServiceParam)

GROUP = "DEFAULT_GROUP"
CONNECT_TIMEOUT_S = 15
CALL_TIMEOUT_S = 8
HTTP_TIMEOUT_S = 5


def emit(op, namespace=None, **fields):
    record = {"op": op}
    if namespace is not None:
        record["namespace"] = namespace
    record.update(fields)
    sys.stdout.write(json.dumps(record, default=str) + "\n")
    sys.stdout.flush()


def hard_exit(code):
    sys.stdout.flush()
    sys.stderr.flush()
    # grpc.aio and the SDK's background tasks may still hold the loop; leave at once.
    os._exit(code)


def admin_register(args, namespace, ip, port):
    """Registers an instance as the admin over plain HTTP v1 (not through the SDK)."""
    q = {"serviceName": args.service, "groupName": GROUP, "namespaceId": namespace,
         "ip": ip, "port": port, "ephemeral": "true",
         "username": "nacos", "password": args.admin_password}
    url = "http://" + args.server + "/nacos/v1/ns/instance?" + urllib.parse.urlencode(q)
    req = urllib.request.Request(url, method="POST", data=b"")
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


async def attempt(op, namespace, coro):
    """Awaits one SDK call; a NacosException is a refusal, reported with its code.
    Returns (allowed, result)."""
    try:
        result = await asyncio.wait_for(coro, CALL_TIMEOUT_S)
    except NacosException as e:
        emit(op, namespace, allowed=False, code=e.error_code, detail=e.message)
        return False, None
    except asyncio.TimeoutError:
        emit(op, namespace, allowed=False, code=None, detail="timed out")
        return False, None
    emit(op, namespace, allowed=True, detail=result)
    return True, result


class Pushes:
    """The instance lists the subscribe callback got."""

    def __init__(self):
        self.lists = []
        self.changed = asyncio.Event()

    async def callback(self, instances):
        self.lists.append(sorted(i.ip for i in instances or []))
        self.changed.set()

    async def wait_for(self, ip, timeout):
        deadline = time.monotonic() + timeout
        while not any(ip in hosts for hosts in self.lists):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except asyncio.TimeoutError:
                pass
        return True


async def one_namespace(args, tmp, index, ns, clients):
    cfg = (ClientConfigBuilder()
           .server_address(args.server)
           .namespace_id(ns)
           .username(args.username)
           .password(args.password)
           .log_dir(os.path.join(tmp, "logs"))
           .cache_dir(os.path.join(tmp, "cache-%d" % index))
           .log_level(logging.INFO)
           .load_cache_at_start(False)
           .grpc_config(GRPCConfig(grpc_timeout=5000))
           .build())
    naming = await asyncio.wait_for(NacosNamingService.create_naming_service(cfg),
                                    CONNECT_TIMEOUT_S)
    clients.append(naming)
    deadline = time.monotonic() + 5
    while not await naming.server_health():
        if time.monotonic() >= deadline:
            raise RuntimeError("the SDK is not connected in %s" % ns)
        await asyncio.sleep(0.1)
    emit("connect", ns, allowed=True)

    own = "%s.%d.1" % (args.ip_prefix, index)
    await attempt("register", ns, naming.register_instance(RegisterInstanceParam(
        service_name=args.service, group_name=GROUP, ip=own, port=8080, ephemeral=True)))
    listed, hosts = await attempt("list", ns, naming.list_instances(ListInstanceParam(
        service_name=args.service, group_name=GROUP, healthy_only=None, subscribe=False)))
    if listed:
        emit("list_hosts", ns, detail=sorted(h.ip for h in hosts))

    pushes = Pushes()
    subscribed, _ = await attempt("subscribe", ns, naming.subscribe(SubscribeServiceParam(
        service_name=args.service, group_name=GROUP, subscribe_callback=pushes.callback)))
    extra = "%s.%d.2" % (args.ip_prefix, index)
    status, body = await asyncio.to_thread(admin_register, args, ns, extra, 8081)
    if status != 200:
        raise RuntimeError("admin register in %s answered %s: %s" % (ns, status, body))
    if subscribed:
        seen = await pushes.wait_for(extra, args.push_seconds)
        emit("push", ns, allowed=seen, detail=pushes.lists[-1:])

    listed, services = await attempt("list_services", ns, naming.list_services(
        ListServiceParam(namespace_id=ns, group_name=GROUP, page_no=1, page_size=100)))
    if listed:
        emit("service_names", ns, detail=sorted(services.services))
    await attempt("deregister", ns, naming.deregister_instance(DeregisterInstanceParam(
        service_name=args.service, group_name=GROUP, ip=own, port=8080, ephemeral=True)))


async def flow(args, tmp):
    clients = []
    try:
        for index, ns in enumerate(n for n in args.namespaces.split(",") if n):
            await one_namespace(args, tmp, index, ns, clients)
    finally:
        for naming in clients:
            try:
                await asyncio.wait_for(naming.shutdown(), 3)
            except Exception:
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--username", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--admin-password", required=True)
    ap.add_argument("--service", required=True)
    ap.add_argument("--namespaces", required=True, help="comma-separated namespace ids")
    ap.add_argument("--ip-prefix", default="127.71", help="instances are <prefix>.<n>.<1|2>")
    ap.add_argument("--push-seconds", type=float, default=5)
    ap.add_argument("--watchdog-seconds", type=float, default=90)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="roster-py3-authz-")

    def watchdog():
        emit("watchdog", reason="whole run exceeded %ss" % args.watchdog_seconds)
        sys.stderr.write("FAIL watchdog\n")
        shutil.rmtree(tmp, ignore_errors=True)
        hard_exit(3)

    timer = threading.Timer(args.watchdog_seconds, watchdog)
    timer.daemon = True
    timer.start()

    async def run_and_exit():
        def quiet_handler(loop, context):
            # The SDK's background tasks (redo of a refused registration, say) may fail;
            # what matters is what each call answered.
            exc = context.get("exception")
            sys.stderr.write("note: SDK background task: %s%s\n"
                             % (context.get("message"), ": %r" % exc if exc else ""))
        asyncio.get_running_loop().set_exception_handler(quiet_handler)
        code = 0
        try:
            await flow(args, tmp)
            emit("done")
        except Exception as e:
            emit("error", reason="%s: %s" % (type(e).__name__, e))
            sys.stderr.write("FAIL error: %s: %s\n" % (type(e).__name__, e))
            code = 2
        timer.cancel()
        shutil.rmtree(tmp, ignore_errors=True)
        hard_exit(code)

    asyncio.run(run_and_exit())
    hard_exit(2)


if __name__ == "__main__":
    main()
