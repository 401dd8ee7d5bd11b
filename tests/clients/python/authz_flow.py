#!/usr/bin/env python3
"""Drive the unmodified nacos-sdk-python 0.1.16 HTTP client (`nacos.NacosClient`) as a
user who is not an admin, in three namespaces, and report what roster allowed.

The script does not judge: for each namespace and operation it prints one JSON line
{"op": ..., "namespace": ..., "allowed": true|false, "detail": ...}, and the Rust test
(tests/it/authz.rs) compares them with the user's permissions. It exits 0 when every
operation was tried (allowed or refused); 2 on an unexpected error; 3 on its watchdog.

Operations, in each namespace given with --namespaces (one SDK client per namespace):
  register   add_naming_instance (ephemeral, no beat thread)
  beat       send_heartbeat
  list       list_naming_instance
  subscribe  subscribe (a 1 s polling listener; its first poll runs in the call)
  subscribe_added
             where subscribe was allowed: the admin registers one more instance over
             plain HTTP (--admin-password); allowed when the listener reports it ADDED
             within --event-seconds
  deregister remove_naming_instance of the admin's instance

Usage:
  authz_flow.py --server 127.0.0.1:8848 --username ann --password P --admin-password AP
                --service NAME --namespaces ns-a,ns-b,ns-c [--ip-prefix 127.21]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import nacos
from nacos.exception import NacosException
from nacos.listener import Event, SubscribeListener

GROUP = "DEFAULT_GROUP"
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
    # SDK timers are non-daemon threads; leave without waiting for them.
    os._exit(code)


def admin_call(args, method, path, params):
    """A plain HTTP v1 call as the admin (not through the SDK)."""
    q = dict(params)
    q.update({"username": "nacos", "password": args.admin_password})
    url = "http://" + args.server + path + "?" + urllib.parse.urlencode(q)
    req = urllib.request.Request(url, method=method, data=b"" if method != "GET" else None)
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def attempt(op, namespace, fn):
    """Runs one SDK call; a 403 (the SDK's "Insufficient privilege.") is a refusal."""
    try:
        result = fn()
    except NacosException as e:
        refused = "Insufficient privilege" in str(e)
        emit(op, namespace, allowed=False, refused=refused, detail=str(e))
        return None
    emit(op, namespace, allowed=True, detail=result)
    return result


class Added:
    """Records the instances a subscribe listener reports as ADDED."""

    def __init__(self):
        self._cond = threading.Condition()
        self.ips = []

    def __call__(self, event, slc, *args, **kwargs):
        if event == Event.ADDED:
            with self._cond:
                self.ips.append(slc.instance.get("ip"))
                self._cond.notify_all()

    def wait_for(self, ip, timeout):
        deadline = time.monotonic() + timeout
        with self._cond:
            while ip not in self.ips:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True


def flow(args, tmp):
    namespaces = [n for n in args.namespaces.split(",") if n]
    clients = []
    try:
        for i, ns in enumerate(namespaces):
            client = nacos.NacosClient(args.server, namespace=ns, username=args.username,
                                       password=args.password, logDir=tmp)
            clients.append(client)
            emit("login", ns, allowed=bool(client.token))
            own = "%s.%d.1" % (args.ip_prefix, i)
            attempt("register", ns, lambda: client.add_naming_instance(
                args.service, own, 8080, ephemeral=True, group_name=GROUP))
            attempt("beat", ns, lambda: client.send_heartbeat(
                args.service, own, 8080, group_name=GROUP))
            attempt("list", ns, lambda: sorted(
                h["ip"] for h in client.list_naming_instance(args.service, group_name=GROUP)["hosts"]))

            # Subscribe (its first poll runs in the call, and raises when refused), then
            # the admin adds an instance: the listener reports it if the user may read.
            added = Added()
            extra = "%s.%d.2" % (args.ip_prefix, i)
            subscribed = attempt("subscribe", ns, lambda: client.subscribe(
                SubscribeListener(fn=added, listener_name="authz-%d" % i),
                1, service_name=args.service, group_name=GROUP) or "subscribed")
            status, body = admin_call(args, "POST", "/nacos/v1/ns/instance", {
                "serviceName": args.service, "groupName": GROUP, "namespaceId": ns,
                "ip": extra, "port": 8081, "ephemeral": "true"})
            if status != 200:
                raise RuntimeError("admin register in %s answered %s: %s" % (ns, status, body))
            if subscribed is not None:
                seen = added.wait_for(extra, args.event_seconds)
                emit("subscribe_added", ns, allowed=seen, detail=added.ips)
                client.stop_subscribe()

            attempt("deregister", ns, lambda: client.remove_naming_instance(
                args.service, extra, 8081, ephemeral=True, group_name=GROUP))
    finally:
        for client in clients:
            try:
                client.stop_subscribe()
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
    ap.add_argument("--ip-prefix", default="127.21", help="instances are <prefix>.<n>.<1|2>")
    ap.add_argument("--event-seconds", type=float, default=8)
    ap.add_argument("--watchdog-seconds", type=float, default=90)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="roster-py-authz-")

    def watchdog():
        emit("watchdog", reason="whole run exceeded %ss" % args.watchdog_seconds)
        sys.stderr.write("FAIL watchdog\n")
        shutil.rmtree(tmp, ignore_errors=True)
        hard_exit(3)

    timer = threading.Timer(args.watchdog_seconds, watchdog)
    timer.daemon = True
    timer.start()
    code = 0
    try:
        flow(args, tmp)
        emit("done")
    except Exception as e:
        emit("error", reason="%s: %s" % (type(e).__name__, e))
        sys.stderr.write("FAIL error: %s: %s\n" % (type(e).__name__, e))
        code = 2
    timer.cancel()
    shutil.rmtree(tmp, ignore_errors=True)
    hard_exit(code)


if __name__ == "__main__":
    main()
