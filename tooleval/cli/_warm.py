"""The warm runner of ``tooleval run``: a background process that has imported what a run imports (Prefect, the
flows, the report, the stages) and forks one child per command.

Why: a cached rerun of a small dataset spends most of its time importing, not running — Prefect ~1 s, the flows
and their report ~0.7 s, tooleval's own modules ~0.6 s of a ~5 s rerun on a quiet 2-core machine (measured with
``python -X importtime`` and py-spy). A forked child starts with all of that done.

How:

* A ``tooleval run`` that finds no runner runs in its own process as always and, when it ends with exit 0 or 1,
  starts a runner in the background (a new session, no terminal), passing it the list of modules the run
  imported (ragas itself left out: :data:`_NOT_PRELOADED`).
* The runner binds a Unix socket in the abstract namespace, named by a digest of what can change what a command
  computes once its modules are imported (:func:`runner_key`): the interpreter (its real path, its prefix and
  version) and ``sys.path`` (an install changes its folders), tooleval's source files (paths, sizes, modification
  times), the Prefect home, and the environment variables read once at start-up or import (Prefect's settings,
  Python's, the locale, the time zone, the numeric libraries'). Nothing else of the command's environment, its
  working folder or its results folder: the child takes those from the command. So a command from an activated
  virtual environment and the same one by the path of its program, or from another terminal, meet the same
  runner, while an edited source file or another Prefect setting never meets modules imported under other
  conditions. The runner then sets the Prefect environment (:func:`tooleval.cli._app.prefect_environment`) and
  imports the modules.
* A later ``tooleval run`` connects and sends its command line, environment and working folder, with its standard
  input, output and error as file descriptors (``SCM_RIGHTS``), so a terminal stays the same terminal. Each side
  checks that the other is a process of its own uid (``SO_PEERCRED``). The runner forks and reports the child's
  pid, then its exit code. The child takes over the descriptors, the environment, the folder and ``sys.argv``,
  rebuilds what was fixed at import from the terminal (the consoles, Prefect's log handlers) and runs the command
  exactly as :func:`tooleval.cli.main` would. The client exits with the child's code (``128 + N`` for a child ended by
  signal N).
* Ctrl-C, SIGTERM, SIGHUP and SIGQUIT at the client are passed to the child, which handles them as a cold
  command does (exit 130, runs recorded ``Crashed``). A client killed by SIGKILL closes the connection; the child
  sees it and interrupts itself the same way, printing nothing more (as a cold command killed so prints nothing).
* The runner ends after ``$TOOLEVAL_PREFECT_SERVER_IDLE_S`` seconds (default 300) without a command, like the
  Prefect server beside it, or as soon as it is idle once a runner of another key claims its Prefect home (one
  runner per home: a claim file there); with that set to 0 no runner is started. ``TOOLEVAL_WARM_RUNNER=0``
  turns the runner off. It needs Linux (abstract sockets, ``/proc``) and Python's ``socket.send_fds``; elsewhere
  every run is cold.
* The runner forks only while it is the process's only thread, checked before every fork (Python's threads and
  the kernel's list of the process's tasks, which also counts threads started by compiled libraries): a thread
  that holds a lock at the fork leaves it held forever in the child. It is single-threaded by construction: one
  loop waits for connections and for its children's exits (``pidfd``), and the numeric libraries it imports are
  told not to start their thread pools (OpenBLAS, Arrow's jemalloc background thread; neither changes a
  computed value, and a command's own subprocesses get the command's environment). When a thread is found
  anyway, the command runs cold and the runner ends.
* A child ends as a cold command does (every exit handler runs: Prefect drains its queues), then leaves without
  the interpreter's teardown (:func:`tooleval.cli._entry.exit_without_teardown`).

The runner holds no file of the results folder and no lease: those belong to each command's child, as they belong
to a cold command's process.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["WarmRequest", "request_for", "run_warm", "runner_key", "start_runner", "serve"]

_KEYED_PREFIXES = (
    # read by Prefect when it is imported (its settings), by the interpreter at start-up, or by the locale and
    # time functions and the numeric and columnar libraries when they load: a child cannot change them any more
    "PREFECT_", "PYTHON", "LC_", "OMP_", "OPENBLAS_", "MKL_", "ARROW_", "PYARROW_", "JE_ARROW_", "DUCKDB_",
    "NUMPY_", "PYDANTIC_",
)
_KEYED = frozenset({"LANG", "LANGUAGE", "TZ", "DO_NOT_TRACK", "MALLOC_ARENA_MAX"})
"""Environment variables that are part of the runner's key, with those of :data:`_KEYED_PREFIXES`. Every other
variable (``PATH``, ``VIRTUAL_ENV``, the prompt, the terminal's, ``TOOLEVAL_*``) is read by the command when it
runs, in the child, which takes the command's whole environment: it never changes what a runner imported."""
_HOME_VARIABLES = ("TOOLEVAL_PREFECT_HOME", "PREFECT_HOME", "XDG_CACHE_HOME", "HOME")
"""The variables that choose the Prefect home (:func:`tooleval.cli._app.prefect_environment`): a runner serves
one home, since Prefect reads it at import. Keyed as absolute paths (a relative value is the working folder's)."""
_RUNNER_THREADS_OFF = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}
"""Set in the runner before it imports anything: numpy's and scipy's OpenBLAS start a pool of threads at import,
and pyarrow's jemalloc a background thread; either would make every fork unsafe. Nothing tooleval computes uses
a threaded BLAS routine (means, sampling and an assignment solver), and Arrow allocates with mimalloc by default;
a command's own subprocesses get the command's environment, not these."""
_SOURCE_PACKAGES = ("tooleval", "flows", "tasks")
_HEADER = struct.Struct("!I")
_CONNECT_TIMEOUT_S = 2.0
_FORK_ANSWER_TIMEOUT_S = 60.0
"""Seconds a client waits for the child's pid: a runner still importing (just started by the previous command)
answers once its imports are done, ~3 s on the 2-core machine; past this the command runs cold."""
_EXIT_GRACE_S = 30.0
"""Seconds a child whose client vanished gets to end its interrupted command before it exits hard."""


@dataclass
class WarmRequest:
    """One ``tooleval run`` command as a warm runner receives it.

    Attributes:
        argv: ``sys.argv`` of the command (``argv[0]`` the program).
        env: Its environment, whole.
        cwd: Its working folder (absolute).
        out: The ``--out`` value as given (default ``results``), for the runner's Prefect environment.
        key: :func:`runner_key` of the above.
    """

    argv: list[str]
    env: dict[str, str]
    cwd: str
    out: str
    key: str = field(default="")


def request_for(argv: list[str]) -> WarmRequest | None:
    """The warm request for this process's command line, or ``None`` when the command may not use a runner: not
    ``run``, ``TOOLEVAL_WARM_RUNNER=0`` (or an invalid value: the cold command reports it), not Linux, or a
    standard stream without a file descriptor."""
    if not _supported() or os.environ.get("TOOLEVAL_WARM_RUNNER", "1").strip() not in ("", "1"):
        return None
    words = [w for w in argv[1:] if not w.startswith("-")]
    if not words or words[0] != "run" or _flag_before_command(argv[1:]):
        return None
    try:
        for stream in (sys.stdin, sys.stdout, sys.stderr):
            stream.fileno()
        cwd = os.getcwd()
    except (AttributeError, OSError, ValueError):
        return None
    request = WarmRequest(argv=list(argv), env=dict(os.environ), cwd=cwd, out=_out_value(argv))
    request.key = runner_key(request)
    return request


def _supported() -> bool:
    return (sys.platform.startswith("linux") and hasattr(socket, "send_fds") and hasattr(os, "fork")
            and hasattr(os, "pidfd_open"))


def _flag_before_command(words: list[str]) -> bool:
    """Whether an option other than ``-q``/``--quiet`` precedes the command (``--version``, ``--help``): those
    end the command line's parsing before ``run`` and stay cold."""
    for word in words:
        if not word.startswith("-"):
            return False
        if word not in ("-q", "--quiet"):
            return True
    return False


def _out_value(argv: list[str]) -> str:
    out = "results"
    for i, word in enumerate(argv):
        if word == "--out" and i + 1 < len(argv):
            out = argv[i + 1]
        elif word.startswith("--out="):
            out = word[len("--out="):]
    return out


def runner_key(request: WarmRequest) -> str:
    """The digest naming the runner that may serve ``request``: sha256 (hex, 40 characters) over the interpreter
    (the real path of ``sys.executable``, ``sys.prefix``, the version), ``sys.path`` (each entry made absolute
    against the command's working folder, with its modification time: an install changes its folder's),
    tooleval's source files (relative path, size, modification time in ns), the variables that choose the Prefect
    home (:data:`_HOME_VARIABLES`, as absolute paths) and those read at start-up or import (:data:`_KEYED`,
    :data:`_KEYED_PREFIXES`)."""
    digest = hashlib.sha256()

    def add(*parts: object) -> None:
        for part in parts:
            digest.update(str(part).encode("utf-8", "surrogatepass"))
            digest.update(b"\0")

    add(os.path.realpath(sys.executable), sys.prefix, sys.version)
    for entry in sys.path:
        folder = os.path.join(request.cwd, entry)  # an absolute entry stays itself
        try:
            add(os.path.abspath(folder), os.stat(folder).st_mtime_ns)
        except OSError:
            add(os.path.abspath(folder), "-")
    for name in _HOME_VARIABLES:
        value = request.env.get(name)
        add(name, os.path.abspath(os.path.join(request.cwd, os.path.expanduser(value))) if value else "-")
    for name in sorted(request.env):
        if name in _KEYED or name.startswith(_KEYED_PREFIXES):
            add(name, request.env[name])
    for root in _source_roots():
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    try:
                        info = os.stat(path)
                    except OSError:
                        continue
                    add(os.path.relpath(path, root), info.st_size, info.st_mtime_ns)
    return digest.hexdigest()[:40]


def _source_roots() -> list[str]:
    from importlib.util import find_spec

    roots = []
    for package in _SOURCE_PACKAGES:
        try:
            spec = find_spec(package)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec is not None else []:
            roots.append(location)
    return roots


def _address(key: str) -> bytes:
    return b"\0tooleval-warm-runner-" + key.encode("ascii")


# --- the client -------------------------------------------------------------------------------------------------

def run_warm(request: WarmRequest) -> int | None:
    """Hand the command to the runner of ``request.key`` and wait for its exit code; ``None`` when no runner
    answered before it forked (the command then runs cold, here). Signals are passed on while it runs."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(_CONNECT_TIMEOUT_S)
        sock.connect(_address(request.key))
        if _peer_uid(sock) != os.getuid():  # a name squatted by another user would receive the environment
            sock.close()
            return None
        payload = json.dumps({"argv": request.argv, "env": request.env, "cwd": request.cwd,
                              "out": request.out}).encode("utf-8", "surrogatepass")
        socket.send_fds(sock, [_HEADER.pack(len(payload))], [0, 1, 2])
        sock.sendall(payload)
        sock.settimeout(_FORK_ANSWER_TIMEOUT_S)
        reader = sock.makefile("rb")
        first = reader.readline()
    except OSError:
        sock.close()
        return None
    if not first.startswith(b"pid "):
        sock.close()
        return None
    child = int(first.split()[1])
    forwarded = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
    previous = {}

    def forward(signum, frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for signum in forwarded:
        previous[signum] = signal.signal(signum, forward)
    try:
        sock.settimeout(None)
        line = reader.readline()
        while not line and _alive(child):  # the runner went away first: wait for the child itself
            time.sleep(0.1)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sock.close()
    if line.startswith(b"exit "):
        return int(line.split()[1])
    sys.stderr.write("tooleval: the warm runner ended before reporting the command's exit code.\n")
    return 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_runner(request: WarmRequest) -> None:
    """Start a runner for ``request`` in the background (after a cold run), unless the Prefect server is told to
    stop with each command (``$TOOLEVAL_PREFECT_SERVER_IDLE_S=0``). The modules this process imported are the
    runner's to import. Never raises: a runner is an optimisation."""
    import subprocess
    import tempfile

    try:
        from tooleval.settings import prefect_server_idle_s

        if prefect_server_idle_s() <= 0:
            return
        home = os.environ.get("PREFECT_HOME")
        modules = [name for name in list(sys.modules) if _preloadable(name)]
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="warm-runner-", dir=home or None,
                                         delete=False) as handle:
            json.dump({"modules": modules, "out": request.out}, handle)
        # ``sys.path`` is this command's (part of the key), set before tooleval is imported: with ``-m`` the
        # working folder would come first and could hold other packages of the same names
        launcher = ("import json, sys; sys.path[:] = json.loads(sys.argv[3]); "
                    "from tooleval.cli._warm import serve; sys.exit(serve(sys.argv[1], sys.argv[2]))")
        subprocess.Popen(
            [sys.executable, "-c", launcher, request.key, handle.name, json.dumps(sys.path)],
            cwd=request.cwd, env=request.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
        )
    except Exception:  # noqa: BLE001 - the command's result is already out; a runner only saves later start-ups
        return


_NOT_PRELOADED = frozenset({"ragas", "_pytest", "pytest", "py", "pluggy"})
"""Top-level packages a runner does not import: ragas starts a thread at import (its analytics batcher), and a
process with a second thread cannot be forked safely (a lock held by that thread stays held in the child); a run
with cached stages does not import ragas, and a child that scores imports it itself. The rest is test machinery.

What ragas imports (LLM clients and frameworks: ~5,000 modules, ~125 MB of a runner that then holds ~420 MB) is kept:
a fresh run's legacy pass would otherwise import it in every child, ~2 s of a 3 s run of a small dataset on a 2-core
machine (a runner without it was 2.3-2.6x slower on a fresh run of the bundled data or of 4 rows than one with it,
measured side by side), while the runner and the server stay together under 700 MB (~650)."""


def _preloadable(name: str) -> bool:
    return not (name == "__main__" or name.endswith(".__main__") or name.split(".")[0] in _NOT_PRELOADED
                or name.startswith("tooleval.cli._warm"))


# --- the runner -------------------------------------------------------------------------------------------------

def serve(key: str, preload_file: str) -> int:
    """The runner's main loop (started by :func:`start_runner`): bind, import, then fork a child per command until
    idle for ``$TOOLEVAL_PREFECT_SERVER_IDLE_S`` seconds. Returns the process's exit code (0; also when another
    runner of the same key already holds the address, or when the runner cannot fork safely)."""
    import gc
    import importlib

    from tooleval.cli._entry import end_without_teardown

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(_address(key))
    except OSError:  # a runner of this key exists (or is starting): it serves
        _remove(preload_file)
        return 0
    listener.listen(16)
    with open(preload_file, encoding="utf-8") as handle:
        preload = json.load(handle)
    _remove(preload_file)
    end_without_teardown()  # before any import registers an exit handler: a child runs it after all of theirs
    for name, value in _RUNNER_THREADS_OFF.items():
        os.environ[name] = value
    from tooleval.cli._app import prefect_environment
    from tooleval.scoring.ragas_metric import hide_provider_sdks, provider_sdks_hidden
    from tooleval.settings import prefect_server_idle_s

    hide_provider_sdks()  # the runner and its children are the command's processes, as the cold command's is
    from tooleval.runs.memory import return_freed_memory

    return_freed_memory()
    prefect_environment(Path(preload["out"]))  # Prefect reads its settings at import: set them first
    idle_s = prefect_server_idle_s()
    with provider_sdks_hidden():  # as the command imported them (instructor's providers among ragas' imports)
        for name in preload["modules"]:
            try:
                importlib.import_module(name)
            except BaseException:  # noqa: BLE001 - a module that cannot be imported here is imported by the child
                continue
    others = other_threads()
    if others:  # an import started a thread: forking would copy a half-held lock
        _log(f"not serving: an import started a thread ({others})")
        return 0
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # a kernel older than 5.3: the loop could not wait for its children and its listener at once
        _log("not serving: this kernel has no pidfd_open")
        return 0
    _log(f"serving {key} with {len(sys.modules)} modules imported, idle time {idle_s:g} s")
    _claim_home(key)
    gc.collect()
    gc.freeze()  # the imported objects stay out of the children's collections (and their pages shared)
    return _Loop(listener, key, idle_s).run()


def other_threads() -> str:
    """The threads of this process other than the calling one, in words (empty when there are none): Python's
    own (``threading``) and, on Linux, every task the kernel lists for the process, which also counts the threads
    that compiled libraries start (a BLAS pool, an allocator's background thread)."""
    import threading

    found = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:  # no /proc: Python's list is all there is to go by
        tasks = [str(os.getpid())]
    if len(tasks) > 1 + len(found):
        names = []
        for task in tasks:
            if task != str(threading.get_native_id()):
                try:
                    with open(f"/proc/self/task/{task}/comm", encoding="utf-8", errors="replace") as handle:
                        names.append(handle.read().strip())
                except OSError:
                    names.append(task)
        found = names
    return ", ".join(found)


class _Loop:
    """The runner's one thread: waits for a command on the listener and for the exit of each child (a pidfd per
    child, readable once it ended), forks a child per command, and reports each child's exit to its client."""

    def __init__(self, listener: socket.socket, key: str, idle_s: float) -> None:
        self.listener, self.key, self.idle_s = listener, key, idle_s
        self.selector = selectors.DefaultSelector()
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, the client's connection)
        self.last_end = time.monotonic()
        self.closing = False  # no more forks: a thread appeared; ends once its children did

    def run(self) -> int:
        while True:
            for selected, _ in self.selector.select(timeout=1.0):
                if selected.fileobj is self.listener:
                    self._accept()
                else:
                    self._reap(selected.fd)
            if not self.children:
                if self.closing:
                    return 0
                if time.monotonic() - self.last_end >= self.idle_s:
                    _log(f"idle for {self.idle_s:g} s: ending")
                    return 0
                if not _holds_home(self.key):
                    _log("a runner of another key serves this Prefect home now: ending")
                    return 0

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        try:
            received = _receive(conn)
        except (OSError, ValueError):
            conn.close()
            return
        if received is None:
            conn.close()
            return
        request, fds = received
        others = other_threads()
        if others:  # the client sees the connection close without a pid and runs the command itself, cold
            _log(f"not forking: another thread is alive ({others}); ending")
            for fd in fds:
                os.close(fd)
            conn.close()
            self._close_listener()
            return
        pid = os.fork()
        if pid == 0:
            self._become_child()
            _child(conn, request, fds)  # never returns
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(f"pid {pid}\n".encode())
        except OSError:
            pass
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (pid, conn)
        self.selector.register(pidfd, selectors.EVENT_READ)

    def _become_child(self) -> None:
        """In a new child: close what belongs to the runner (its listener, its selector, the other commands'
        connections and pidfds)."""
        self.selector.close()
        self.listener.close()
        for pidfd, (_, conn) in self.children.items():
            conn.close()
            os.close(pidfd)

    def _reap(self, pidfd: int) -> None:
        pid, conn = self.children.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        try:
            conn.sendall(f"exit {code if code >= 0 else 128 - code}\n".encode())
        except OSError:
            pass
        conn.close()
        self.last_end = time.monotonic()

    def _close_listener(self) -> None:
        """Stop serving: the address is free at once for a runner started by the next cold command."""
        self.closing = True
        self.selector.unregister(self.listener)
        self.listener.close()


def _receive(conn: socket.socket) -> tuple[dict, list[int]] | None:
    """One request: the peer's uid checked, the header with the three descriptors, then the payload."""
    conn.setblocking(True)
    conn.settimeout(10.0)
    if _peer_uid(conn) != os.getuid():
        return None
    header, fds, _flags, _addr = socket.recv_fds(conn, _HEADER.size, 3)
    if len(header) != _HEADER.size or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    size = _HEADER.unpack(header)[0]
    payload = b""
    while len(payload) < size:
        chunk = conn.recv(size - len(payload))
        if not chunk:
            raise ValueError("connection closed mid-request")
        payload += chunk
    conn.settimeout(None)
    return json.loads(payload.decode("utf-8", "surrogatepass")), fds


def _peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket (``SO_PEERCRED``)."""
    credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", credentials)[1]


def _child(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: become the client's command and run it; ends the process with its code, as a cold
    command ends (:func:`tooleval.cli._entry.exit_without_teardown`)."""
    import threading

    from tooleval.cli._entry import exit_without_teardown

    code = 1
    try:
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(line_buffering=stream is sys.stderr or stream.isatty())
        _refresh_terminal_state()
        threading.Thread(target=_watch_client, args=(conn,), daemon=True).start()
        from tooleval.cli._entry import run_app

        code = run_app()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the traceback a cold command would print, then exit 1
        import traceback

        traceback.print_exc()
        code = 1
    exit_without_teardown(code)


def _refresh_terminal_state() -> None:
    """Rebuild what was fixed at import from the runner's streams and environment: the command line's consoles
    (colour system, width, terminal detection) and Prefect's console log handler."""
    from tooleval.cli._app import console, err_console

    console.__init__()
    err_console.__init__(stderr=True)
    if "prefect.logging.configuration" in sys.modules:
        from prefect.logging.configuration import setup_logging

        setup_logging(incremental=False)


def _watch_client(conn: socket.socket) -> None:
    """Interrupt this command, as Ctrl-C would, when its client is gone (killed: the connection closes), and
    print nothing more: a cold command killed with SIGKILL prints nothing either, while this one, interrupted
    anywhere (inside a DuckDB query: ``RuntimeError: Query interrupted``), would print its ending into the
    terminal the dead client shared with it."""
    try:
        while conn.recv(1):
            pass
    except OSError:
        pass
    try:
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        os.close(quiet)
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(_EXIT_GRACE_S)
    os._exit(130)


def _claim_path() -> str | None:
    """``<Prefect home>/warm-runner.json``: the key of the runner that serves the home. One runner per home: a
    runner whose key no command matches any more (an edited file, another setting) would only hold memory until
    its idle time, so a newer runner's claim ends it as soon as it has no command running."""
    home = os.environ.get("PREFECT_HOME")
    return os.path.join(home, "warm-runner.json") if home else None


def _claim_home(key: str) -> None:
    path = _claim_path()
    if path:
        try:
            temporary = f"{path}.{os.getpid()}"
            with open(temporary, "w", encoding="utf-8") as handle:
                json.dump({"key": key, "pid": os.getpid()}, handle)
            os.replace(temporary, path)
        except OSError:
            pass


def _holds_home(key: str) -> bool:
    """Whether this runner's claim is still the home's (an unreadable claim counts as held: end only on proof)."""
    try:
        with open(_claim_path() or "", encoding="utf-8") as handle:
            return json.load(handle).get("key") == key
    except (OSError, ValueError, AttributeError):
        return True


def _log(message: str) -> None:
    """One line in ``<Prefect home>/warm-runner.log``: why a runner serves or ends (it has no terminal)."""
    home = os.environ.get("PREFECT_HOME")
    if home:
        try:
            with open(os.path.join(home, "warm-runner.log"), "a", encoding="utf-8") as log:
                log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()}: {message}\n")
        except OSError:
            pass


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
