"""py_eureka_client against roster's Eureka API: registers one instance (renewing every
second, a 3 s lease) with the credentials in the server URL, discovers it and another
application through the registry it fetches (XML, as the library reads it: a full fetch,
then deltas), and on a line on stdin stops (cancelling its lease).

    python eureka_flow.py --server http://user:pass@127.0.0.1:P/eureka/ --app APP \
        --ip 127.x.y.z --port N --other OTHER-APP

Prints one JSON line per step: {"step": ..., "ok": true, ...}; a failure is ok false.
"""

import argparse
import asyncio
import json
import sys
import time

import py_eureka_client.eureka_client as eureka_client


def step(name, **fields):
    print(json.dumps({"step": name, "ok": True, **fields}), flush=True)


def fail(name, reason):
    print(json.dumps({"step": name, "ok": False, "reason": reason}), flush=True)
    sys.exit(1)


def shown(app):
    return [
        {
            "id": i.instanceId,
            "ip": i.ipAddr,
            "port": i.port.port,
            "status": i.status,
            "metadata": i.metadata,
        }
        for i in (app.instances if app else [])
    ]


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--app", required=True)
    p.add_argument("--ip", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--other", required=True)
    a = p.parse_args()
    if not a.ip.startswith("127."):
        fail("args", "not a loopback address: " + a.ip)
    client = await eureka_client.init_async(
        eureka_server=a.server,
        app_name=a.app,
        instance_id=f"{a.app}-1",
        instance_host=a.ip,
        instance_ip=a.ip,
        instance_port=a.port,
        renewal_interval_in_secs=1,
        duration_in_secs=3,
        metadata={"lang": "python"},
    )
    step("registered", id=f"{a.app}-1")
    deadline = time.monotonic() + 30
    while True:
        apps = client.applications
        mine = shown(apps.get_application(a.app))
        other = shown(apps.get_application(a.other))
        if mine and other:
            break
        if time.monotonic() > deadline:
            fail("discovered", f"own {mine}, {a.other} {other}")
        await asyncio.sleep(0.2)
    step("discovered", own=mine, other=other, hashcode=apps.appsHashcode)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await eureka_client.stop_async()
    step("stopped")


asyncio.run(main())
