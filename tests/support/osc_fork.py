"""Runs `openstack` commands, each in a process forked from this one after it imported the CLI.

Not imported by the tests: the openstackclient virtualenv's python runs this file
(tests/support/openstack.py starts it once per test process). Importing the CLI costs
1.3-1.8 s of CPU, most of each command's 2.5-3 s on an idle machine; a forked child
runs the CLI's own entry point (``openstackclient.shell.main``) with the command's argv
and environment, stdout and stderr in the files the request names, so it is the real
CLI with only its imports shared.

Requests, one JSON object a line on stdin: ``argv`` (argv[0] the script), ``env``,
``stdout`` and ``stderr`` (paths), ``timeout`` (seconds). Answers on stdout, one a line:
``{"returncode": N}``, or ``{"timeout": true}`` once the child ran past its timeout (it
is killed, as subprocess.run kills it). The standard library only: this file runs
beside the CLI, not in the project's virtualenv.
"""

import contextlib
import json
import os
import signal
import sys
import time
import traceback
from typing import Any


def main() -> None:
    # This file's directory, first on sys.path, holds tests/support/openstack.py: not the SDK's `openstack`.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    requests = os.fdopen(os.dup(0), "r")
    answers = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # children read nothing and write nothing to the protocol's pipes
    os.dup2(null, 1)
    from openstackclient import shell  # type: ignore[import-not-found]  # the import every command shares

    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in requests:
        answer = run(json.loads(line), shell, (requests.fileno(), answers.fileno()))
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def run(request: dict[str, Any], shell: Any, private: tuple[int, int]) -> dict[str, Any]:
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    pid = os.fork()
    if pid == 0:
        _child(request, shell, private, out, err)
    os.close(out)
    os.close(err)
    deadline = time.monotonic() + float(request["timeout"])
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"returncode": os.waitstatus_to_exitcode(status)}
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"timeout": True}
        time.sleep(0.005)


def _child(request: dict[str, Any], shell: Any, private: tuple[int, int], out: int, err: int) -> None:
    code = 1
    try:
        for fd in private:
            os.close(fd)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        code = _exit_code(shell, sys.argv[1:])
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # nothing left to report it to
                stream.flush()
        os._exit(code)


def _exit_code(shell: Any, argv: list[str]) -> int:
    """What ``sys.exit(main())`` in the `openstack` script leaves as the exit status."""
    try:
        result = shell.main(argv)
    except SystemExit as e:
        result = e.code
    except BaseException:
        traceback.print_exc()
        return 1
    if result is None:
        return 0
    if isinstance(result, int):
        return result & 0xFF
    print(result, file=sys.stderr)
    return 1


if __name__ == "__main__":
    main()
