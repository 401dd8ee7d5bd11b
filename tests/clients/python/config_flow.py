#!/usr/bin/env python3
"""Drive the unmodified nacos-sdk-python 0.1.16 config client (`nacos.NacosClient`, HTTP v1)
against a roster node: publish, get, a watcher called back over the long poll, remove, and a
second namespace kept apart.

Prints one JSON object per step on stdout ({"step": ..., "ok": true, ...}). Exit code 0 only
if every check passed; otherwise the failing step is printed with "ok": false and a one-line
reason goes to stderr.

Usage:
  config_flow.py --server 127.0.0.1:8848 --username nacos --password P --data-id NAME
                 --namespace NS
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time

import nacos

GROUP = "DEFAULT_GROUP"
CALLBACK_WAIT_S = 15  # a change reaches a held long poll at once; allow for slow machines
BUDGET_S = 150  # the whole run


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
    # The SDK's pullers are threads blocked in a long poll; leave without waiting for them.
    os._exit(code)


class Calls:
    """What a config watcher was called back with, in order."""

    def __init__(self):
        self._cond = threading.Condition()
        self._calls = []

    def record(self, params):
        # A bound method: the SDK logs callbacks by `__name__`.
        with self._cond:
            self._calls.append(dict(params))
            self._cond.notify_all()

    def wait_for(self, content, timeout):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for call in self._calls:
                    if call.get("content") == content:
                        return call
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def contents(self):
        with self._cond:
            return [c.get("content") for c in self._calls]


def client_for(args, namespace, work):
    """A client of `namespace` whose snapshot and failover files stay in `work`."""
    client = nacos.NacosClient(args.server, namespace=namespace, username=args.username,
                               password=args.password, logDir=os.path.join(work, "logs"))
    client.set_options(snapshot_base=os.path.join(work, "snapshot"),
                       failover_base=os.path.join(work, "failover"),
                       pulling_timeout=30)
    return client


def expect(step, cond, message, **details):
    if not cond:
        raise CheckFailed(step, message, **details)


def flow(args, work, state):
    data_id = args.data_id
    public = client_for(args, "", work)
    other = client_for(args, args.namespace, work)
    state["clients"] = [public, other]

    step = state["step"] = "publish"
    first = "greeting: hello\nlist: [1, 2]\nsymbols: a&b=c+d%20 中文\n"
    expect(step, public.publish_config(data_id, GROUP, first, config_type="yaml") is True,
           "publish_config did not answer true")
    emit(step, data_id=data_id)

    step = state["step"] = "get"
    got = public.get_config(data_id, GROUP, no_snapshot=True)
    expect(step, got == first, "get_config answered other content", got=got)
    emit(step, length=len(got))

    step = state["step"] = "other_namespace_apart"
    expect(step, other.get_config(data_id, GROUP, no_snapshot=True) is None,
           "the item showed in the other namespace before it was published there")
    theirs = "namespace: %s\n" % args.namespace
    expect(step, other.publish_config(data_id, GROUP, theirs) is True,
           "publish_config in the other namespace did not answer true")
    expect(step, other.get_config(data_id, GROUP, no_snapshot=True) == theirs,
           "the other namespace's content did not read back")
    expect(step, public.get_config(data_id, GROUP, no_snapshot=True) == first,
           "publishing in the other namespace changed the public one")
    emit(step, namespace=args.namespace)

    step = state["step"] = "watch"
    calls = Calls()
    other_calls = Calls()
    public.add_config_watcher(data_id, GROUP, calls.record)
    other.add_config_watcher(data_id, GROUP, other_calls.record)
    # Let the pullers' first polls reach the server and be held, then change the item.
    time.sleep(2)
    second = first + "changed: true\n"
    t0 = time.monotonic()
    expect(step, public.publish_config(data_id, GROUP, second) is True,
           "the second publish did not answer true")
    call = calls.wait_for(second, CALLBACK_WAIT_S)
    expect(step, call is not None, "the watcher was not called back with the new content",
           calls=calls.contents())
    after_ms = int((time.monotonic() - t0) * 1000)
    expect(step, call.get("data_id") == data_id and call.get("group") == GROUP,
           "the callback named another item", call=call)
    emit(step, after_ms=after_ms)

    step = state["step"] = "watch_other_namespace"
    theirs_changed = theirs + "changed: true\n"
    expect(step, other.publish_config(data_id, GROUP, theirs_changed) is True,
           "publish in the other namespace did not answer true")
    call = other_calls.wait_for(theirs_changed, CALLBACK_WAIT_S)
    expect(step, call is not None,
           "the other namespace's watcher was not called back (the answer must name the tenant)",
           calls=other_calls.contents())
    expect(step, call.get("namespace") == args.namespace, "the callback named another namespace",
           call=call)
    expect(step, second == public.get_config(data_id, GROUP, no_snapshot=True),
           "the other namespace's change reached the public item")
    emit(step, namespace=args.namespace)

    step = state["step"] = "remove"
    expect(step, public.remove_config(data_id, GROUP) is True, "remove_config did not answer true")
    expect(step, public.get_config(data_id, GROUP, no_snapshot=True) is None,
           "get_config after remove_config did not answer None")
    # The watcher hears of the removal too: called back with no content.
    call = calls.wait_for(None, CALLBACK_WAIT_S)
    expect(step, call is not None, "the watcher did not hear of the removal",
           calls=calls.contents())
    expect(step, other.get_config(data_id, GROUP, no_snapshot=True) == theirs_changed,
           "removing the public item removed the other namespace's")
    expect(step, other.remove_config(data_id, GROUP) is True,
           "remove_config in the other namespace did not answer true")
    expect(step, other.get_config(data_id, GROUP, no_snapshot=True) is None,
           "the other namespace's item outlived its removal")
    emit(step)


def stop(clients):
    """Ends the SDK's helper process (a multiprocessing Manager that would otherwise outlive
    this one and keep stdout open)."""
    for client in clients:
        mgr = getattr(client, "process_mgr", None)
        if mgr is not None:
            try:
                mgr.shutdown()
            except Exception:
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True, help="host:port of roster's HTTP API")
    ap.add_argument("--username", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--data-id", required=True)
    ap.add_argument("--namespace", required=True, help="the second namespace (tenant)")
    args = ap.parse_args()

    state = {"clients": [], "step": "start"}

    def watchdog():
        emit("watchdog", ok=False, error="run exceeded %d s" % BUDGET_S)
        sys.stderr.write("FAIL watchdog: run exceeded %d s\n" % BUDGET_S)
        stop(state["clients"])
        hard_exit(3)

    dog = threading.Timer(BUDGET_S, watchdog)
    dog.daemon = True
    dog.start()

    work = tempfile.mkdtemp(prefix="nacos-py-config-")
    code = 0
    try:
        flow(args, work, state)
    except CheckFailed as e:
        emit(e.step, ok=False, error=str(e), **e.details)
        sys.stderr.write("FAIL %s: %s\n" % (e.step, e))
        code = 1
    except Exception as e:  # an unexpected SDK exception is a failed check too
        emit(state["step"], ok=False, error="unexpected %s: %s" % (type(e).__name__, e))
        sys.stderr.write("FAIL %s: unexpected %s: %s\n" % (state["step"], type(e).__name__, e))
        code = 2
    finally:
        stop(state["clients"])
        shutil.rmtree(work, ignore_errors=True)
    if code == 0:
        emit("done")
    hard_exit(code)


if __name__ == "__main__":
    main()
