"""OpenEnv's own client (``GenericEnvClient(...).sync()``) against ``lopd serve``, run by
``.venv-openenv``'s Python (OpenEnv's client imports its server package, which this project's venv
lacks). ``python openenv_client.py URL OP [JSON]`` prints one JSON result; see test_openenv_server.py.

Ops: ``sessions`` (the JSON a list of ``{"reset": {...}, "actions": [...]}``, all sessions open at once),
``probes`` (bad requests, each answered by the message of the error the client raised), ``capacity N``
(N + 1 sessions: the last is refused) and ``hold`` (reset the JSON's options, print "ready", wait).
"""

import json
import sys
import threading
import time

from openenv import GenericEnvClient


def client(url):
    return GenericEnvClient(base_url=url, message_timeout_s=120).sync()


def result(r):
    return {"observation": r.observation, "reward": r.reward, "done": r.done}


def sessions(url, plans):
    out = [None] * len(plans)
    opened = threading.Barrier(len(plans))

    def play(i):
        with client(url) as env:
            first = result(env.reset(**plans[i]["reset"]))
            opened.wait(timeout=120)  # every session holds its env before any steps: states must stay apart
            out[i] = {"reset": first, "steps": [result(env.step({"text": a})) for a in plans[i]["actions"]]}

    threads = [threading.Thread(target=play, args=(i,)) for i in range(len(plans))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is the result
        return f"{type(e).__name__}: {e}"
    return None


def probes(url, options):
    out = {}
    with client(url) as env:
        out["step_before_reset"] = error_of(lambda: env.step({"text": "hi"}))
        env.reset(**options)
        out["malformed_action"] = error_of(lambda: env.step({"txt": "hi"}))
        out["action_not_text"] = error_of(lambda: env.step({"text": {"a": 1}}))
        out["same_session_goes_on"] = result(env.step({"text": "done"}))
        out["unknown_task"] = error_of(lambda: env.reset(task_id="no-such-task"))
        out["seed_not_int"] = error_of(lambda: env.reset(seed="zero"))
    with client(url) as env:
        env.reset(**options)
        out["ten_mb_message"] = error_of(lambda: env.step({"text": "x" * (10 << 20)}))
    with client(url) as env:
        out["fresh_session_after_all"] = result(env.reset(**options))
    return out


def capacity(url, n):
    held = [client(url) for _ in range(n)]
    for env in held:
        env.reset()
    extra = client(url)
    refused = error_of(extra.reset)
    for env in held:
        env.close()
    time.sleep(0.5)  # the server destroys closed sessions asynchronously
    again = error_of(extra.reset) if refused else "the extra session was not refused"
    extra.close()
    return {"refused": refused, "after_closing": again}


def hold(url, options):
    env = client(url)
    env.reset(**options)
    print(json.dumps("ready"), flush=True)
    time.sleep(600)


if __name__ == "__main__":
    url, op = sys.argv[1], sys.argv[2]
    arg = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    fn = {"sessions": sessions, "probes": probes, "capacity": capacity, "hold": hold}[op]
    print(json.dumps(fn(url, arg)), flush=True)
