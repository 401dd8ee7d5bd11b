#!/usr/bin/env python3
"""Drive the unmodified nacos-sdk-python 3.x config client (gRPC, asyncio, package
`v2.nacos`) against roster: publish, get, a listener called back after another client's
publish, compare-and-set, bad input, remove.

Two clients: the writer (on --writer-server, default --server) publishes and removes;
the listener (on --server) listens and reads. Given two nodes of a cluster, the
listener's callbacks prove that a publish through one node is pushed by another.

Prints one JSON object per step on stdout ({"step": ..., "ok": true, ...}). Exit code 0
only if every check passed; 1 when a check failed (the step is printed with "ok": false,
a `FAIL <step>: <reason>` line and the tail of the SDK's log go to stderr); 2 on an
unexpected error; 3 when the watchdog fired.

Usage:
  config_flow.py --server 127.0.0.1:8848 --username nacos --password P --data-id ID
                 [--writer-server 127.0.0.1:8850] [--group DEFAULT_GROUP]
                 [--max-push-ms 5000] [--watchdog-seconds 90] [--keep-tmp]

Steps:
  connect      both clients created (login over HTTP, gRPC to port + 1000) and RUNNING
  publish      the writer publishes round 1 (type properties): True
  listen       the listener's add_listener; its callback gets round 1 (the SDK listens,
               is told the item differs from its empty cache, and reads it)
  get          the listener's get_config answers round 1
  push         the writer publishes round 2; the listener's callback gets it within
               --max-push-ms: only a ConfigChangeNotifyRequest can bring it that soon
               (the SDK re-listens on its own every 5 minutes)
  cas          publish round 3 with the md5 of round 2 (the stored one): True; then
               round 4 with that now stale md5: refused (NacosException or False), and
               get_config still answers round 3
  gray         a beta (beta_ips) for 127.0.0.9, then one for 127.0.0.1: the listener's
               callback gets the second, never the first, and get_config answers it
  bad_input    a publish with dataId "a b": refused with errorCode 400 and a message
               naming 'dataId'
  remove       remove_config: True; get_config then answers "" (not found), and the
               listener's callback is told (content "")
  sdk_log      no sign of trouble in the SDK's log: unparsable payloads, handler
               exceptions, a broken stream, failed listens or refreshes
  shutdown     both clients shut down
"""

import argparse
import asyncio
import hashlib
import logging
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time

from v2.nacos import (ClientConfigBuilder, ConfigParam, GRPCConfig, NacosConfigService,
                      NacosException)
from v2.nacos import __version__ as SDK_VERSION

CONNECT_TIMEOUT_S = 15  # create_config_service: login + channel + server check + setup
CALL_TIMEOUT_S = 8  # any single SDK call
LISTEN_TIMEOUT_S = 12  # the SDK's listen loop wakes every 5 s; then listen + query
READ_TIMEOUT_S = 5  # a read that waits for a publish to reach the listener's node

# SDK log lines that mean roster sent something the SDK could not handle, or a listen
# or a refresh failed.
SDK_LOG_PROBLEMS = [
    r"handle server request occur exception",
    r"unsupported payload type",
    r"bi stream broken",
    r"connection is unregistered",
    r"failed to process server request",
    r"failed to send response",
    r"failed to batch listen",
    r"failed to refresh config",
    r"send request fail",
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


def md5(text):
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def content(round_no):
    return f"greeting=hello\nround={round_no}\n"


def log_problems(log_path):
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    pat = re.compile("|".join(SDK_LOG_PROBLEMS), re.IGNORECASE)
    return [line[:600] for line in lines if pat.search(line)]


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
    except NacosException as e:
        raise CheckFailed(step, f"{what} raised NacosException {e.error_code}: {e.message}")


class Callbacks:
    """What the listener's callback got, in order."""

    def __init__(self):
        self.contents = []
        self.changed = asyncio.Event()

    async def listener(self, tenant, group, data_id, text):
        self.contents.append(text)
        self.changed.set()

    async def wait_for(self, want, timeout):
        """Waits until the callback got `want`; the time it took, or None."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        while want not in self.contents:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except asyncio.TimeoutError:
                pass
        return round((time.monotonic() - t0) * 1000)


async def connect(args, state, name, server):
    cfg = (ClientConfigBuilder()
           .server_address(server)
           .namespace_id(args.namespace)
           .username(args.username)
           .password(args.password)
           .log_dir(os.path.join(state["tmp"], "logs-" + name))
           .cache_dir(os.path.join(state["tmp"], "cache-" + name))
           .log_level(logging.DEBUG)
           .load_cache_at_start(False)
           .grpc_config(GRPCConfig(grpc_timeout=5000))
           .build())
    client = await call("connect", f"create_config_service ({name})",
                        NacosConfigService.create_config_service(cfg), CONNECT_TIMEOUT_S)
    state["clients"].append(client)
    deadline = time.monotonic() + 5
    while not await client.server_health():
        if time.monotonic() >= deadline:
            raise CheckFailed("connect", f"the {name} client is not RUNNING")
        await asyncio.sleep(0.1)
    return client


async def read_until(step, client, param, want, timeout=READ_TIMEOUT_S):
    """get_config until it answers `want` (a publish through another node is applied
    there a moment later); what it answered last."""
    deadline = time.monotonic() + timeout
    while True:
        got = await call(step, "get_config", client.get_config(param.model_copy()))
        if got == want or time.monotonic() >= deadline:
            return got
        await asyncio.sleep(0.1)


async def flow(args, state):
    state["log_path"] = os.path.join(state["tmp"], "logs-listener", "config.log")
    writer = await connect(args, state, "writer", args.writer_server or args.server)
    listener = await connect(args, state, "listener", args.server)
    emit("connect", sdk_version=SDK_VERSION)

    item = ConfigParam(data_id=args.data_id, group=args.group)

    def publication(round_no, **extra):
        return ConfigParam(data_id=args.data_id, group=args.group,
                           content=content(round_no), **extra)

    step = "publish"
    ok = await call(step, "publish_config", writer.publish_config(
        publication(1, type="properties")))
    if ok is not True:
        raise CheckFailed(step, f"publish_config returned {ok!r}, want True")
    emit(step, data_id=args.data_id)

    step = "listen"
    callbacks = Callbacks()
    await call(step, "add_listener",
               listener.add_listener(args.data_id, args.group, callbacks.listener))
    waited = await callbacks.wait_for(content(1), LISTEN_TIMEOUT_S)
    if waited is None:
        raise CheckFailed(step, f"the callback did not get round 1 within {LISTEN_TIMEOUT_S}s",
                          got=callbacks.contents)
    emit(step, waited_ms=waited)

    step = "get"
    got = await read_until(step, listener, item, content(1))
    if got != content(1):
        raise CheckFailed(step, f"get_config answered {got!r}, want round 1")
    emit(step)

    step = "push"
    t0 = time.monotonic()
    ok = await call(step, "publish_config", writer.publish_config(publication(2)))
    if ok is not True:
        raise CheckFailed(step, f"publish_config returned {ok!r}, want True")
    waited = await callbacks.wait_for(content(2), args.max_push_ms / 1000)
    if waited is None:
        raise CheckFailed(step, f"the callback did not get round 2 within {args.max_push_ms} ms",
                          got=callbacks.contents)
    emit(step, latency_ms=round((time.monotonic() - t0) * 1000))

    step = "cas"
    ok = await call(step, "publish_config (current md5)", writer.publish_config(
        publication(3, cas_md5=md5(content(2)))))
    if ok is not True:
        raise CheckFailed(step, f"a compare-and-set with the current md5 returned {ok!r}")
    try:
        stale = await asyncio.wait_for(writer.publish_config(
            publication(4, cas_md5=md5(content(2)))), CALL_TIMEOUT_S)
        refused = {"returned": stale}
        if stale is not False:
            raise CheckFailed(step, f"a compare-and-set with a stale md5 returned {stale!r}")
    except NacosException as e:
        refused = {"code": e.error_code, "message": e.message}
    except asyncio.TimeoutError:
        raise CheckFailed(step, "a compare-and-set with a stale md5 did not return")
    got = await read_until(step, listener, item, content(3))
    if got != content(3):
        raise CheckFailed(step, f"after the refused compare-and-set get_config answered {got!r}, "
                          "want round 3")
    emit(step, stale=refused)

    step = "gray"
    # A beta for another address leaves the listener with round 3; one for its own
    # (127.0.0.1) reaches its callback and its reads (the removal below removes it too).
    for ips, text in (("127.0.0.9", "gray=far"), ("127.0.0.1", "gray=near")):
        ok = await call(step, f"publish_config (beta_ips={ips})", writer.publish_config(
            ConfigParam(data_id=args.data_id, group=args.group, content=text, beta_ips=ips)))
        if ok is not True:
            raise CheckFailed(step, f"a beta publish to {ips} returned {ok!r}, want True")
    waited = await callbacks.wait_for("gray=near", args.max_push_ms / 1000)
    if waited is None:
        raise CheckFailed(step, "the callback did not get the beta for its address",
                          got=callbacks.contents)
    got = await read_until(step, listener, item, "gray=near")
    if got != "gray=near" or "gray=far" in callbacks.contents:
        raise CheckFailed(step, f"get_config answered {got!r}; callbacks {callbacks.contents}")
    emit(step, latency_ms=waited)

    step = "bad_input"
    try:
        answer = await asyncio.wait_for(writer.publish_config(ConfigParam(
            data_id="a b", group=args.group, content="x=1")), CALL_TIMEOUT_S)
        raise CheckFailed(step, f"a publish with dataId 'a b' returned {answer!r}")
    except NacosException as e:
        if e.error_code != 400 or "dataId" not in (e.message or ""):
            raise CheckFailed(step, f"refused with {e.error_code}: {e.message!r}; want 400 "
                              "naming 'dataId'")
        emit(step, code=e.error_code, message=e.message)
    except asyncio.TimeoutError:
        raise CheckFailed(step, "a publish with dataId 'a b' did not return")

    step = "remove"
    ok = await call(step, "remove_config", writer.remove_config(item.model_copy()))
    if ok is not True:
        raise CheckFailed(step, f"remove_config returned {ok!r}, want True")
    got = await read_until(step, listener, item, "")
    if got != "":
        raise CheckFailed(step, f"after remove get_config answered {got!r}, want ''")
    waited = await callbacks.wait_for("", args.max_push_ms / 1000)
    if waited is None:
        raise CheckFailed(step, "the callback was not told of the removal",
                          got=callbacks.contents)
    emit(step, callbacks=len(callbacks.contents))

    step = "sdk_log"
    problems = []
    for name in ("writer", "listener"):
        problems += log_problems(os.path.join(state["tmp"], "logs-" + name, "config.log"))
    if problems:
        raise CheckFailed(step, f"{len(problems)} problem line(s) in the SDK log",
                          lines=problems[:10])
    emit(step)

    step = "shutdown"
    clients, state["clients"] = state["clients"], []
    for client in clients:
        await call(step, "shutdown", client.shutdown(), 5)
    emit(step)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True, help="the listener's roster HTTP address")
    ap.add_argument("--writer-server", help="the writer's (default: --server)")
    ap.add_argument("--username", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--data-id", required=True)
    ap.add_argument("--group", default="DEFAULT_GROUP")
    ap.add_argument("--namespace", default="", help="the tenant (empty: public)")
    ap.add_argument("--max-push-ms", type=int, default=5000)
    ap.add_argument("--watchdog-seconds", type=float, default=90)
    ap.add_argument("--keep-tmp", action="store_true", help="keep the SDK log/cache dir")
    args = ap.parse_args()

    state = {"tmp": tempfile.mkdtemp(prefix="roster-py3-config-"), "clients": [],
             "log_path": None}

    def cleanup_tmp():
        if not args.keep_tmp:
            shutil.rmtree(state["tmp"], ignore_errors=True)

    def dump_sdk_log():
        lines = tail(state["log_path"]) if state["log_path"] else []
        if lines:
            sys.stderr.write(f"--- last {len(lines)} lines of the SDK log ({state['log_path']})"
                             " ---\n")
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
            for client in state["clients"]:  # failed mid-way: still close the connections
                try:
                    await asyncio.wait_for(client.shutdown(), 3)
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
