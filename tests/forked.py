"""Python commands of the tests (a crawl, the CLI, ``scrapy``) run in a process forked from a warm one.

A new interpreter spends about three seconds importing Scrapy, trafilatura and the package before a
crawl of the test site that takes one. Each test process (each xdist worker) therefore starts one
*fork server* the first time it is asked, which imports all that once and waits; each command is
then a process forked from it: a process of its own, with its own pid, exit status, signals, cwd,
environment and standard streams, and fresh state (no crawl has run in the server, and no reactor
is installed in it), only without the imports' wait.

    popen([sys.executable, "tests/crawl_runner.py", "config.json"], cwd=..., stderr=PIPE)
    run([sys.executable, "-m", "scrapy_neardup.cli", "scan", ...], capture_output=True, text=True)

take the arguments of ``subprocess.Popen`` and ``subprocess.run`` and give the same objects back;
the command is ``sys.executable`` and a script, ``-m module`` or ``-c code``, then its arguments.
What a test tests about a fresh interpreter (another Python path, options of the interpreter, a new
session for a process group) stays with ``subprocess``.

    python tests/forked.py SOCKET   # the server: imports, then answers on the Unix socket SOCKET

The protocol: a client connects and sends a length-prefixed JSON request with its stdin, stdout and
stderr as file descriptors (SCM_RIGHTS). The server forks a *keeper*, which forks the command's
process, sends back ``pid N``, waits for it and sends ``exit N`` (``-N``: killed by signal N).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import types

# What a crawl, a scan and the CLI import (each one imports Twisted's reactor itself: importing it
# here would install it in every command, before Scrapy can choose the asyncio one).
PRELOAD = [
    "scrapy",
    "scrapy.cmdline",
    "scrapy.crawler",
    "scrapy.commands.crawl",
    "scrapy.http",
    "scrapy.spiders",
    "scrapy.exporters",
    "scrapy.extensions.feedexport",
    "scrapy.core.downloader.handlers.http11",
    "scrapy.core.engine",
    "scrapy.core.scheduler",
    "scrapy.pipelines",
    "scrapy.utils.test",
    "twisted.internet.asyncioreactor",
    "trafilatura",
    "resiliparse.extract.html2text",
    "resiliparse.parse.html",
    "tldextract",
    "numpy",
    "numpy.ma",
    "runpy",
    "xxhash",
    "warcio",
    "lxml.html",
    "charset_normalizer",
    "sqlite3",
    "multiprocessing",
    "concurrent.futures.process",
    "redis",
    "scrapy_redis",
    "psycopg",
]
PACKAGES = ["scrapy_neardup"]


# ---- the server ---------------------------------------------------------------------------------


def _preload() -> None:
    import importlib
    import pkgutil
    import warnings

    with warnings.catch_warnings():  # a command that imports a deprecated module warns itself
        warnings.simplefilter("ignore")
        _import_all(importlib, pkgutil)
    if "twisted.internet.reactor" in sys.modules:
        raise RuntimeError(
            "a preloaded module installed Twisted's reactor: the commands could not choose theirs"
        )
    # What was imported lives as long as any command: out of the collector's sight, it is neither
    # walked by each full collection nor copied page by page into each command as the collector
    # writes to it, and a command's exit takes 0.08 s, not 0.65 (gc.freeze, made for this).
    gc.collect()
    gc.freeze()


def _import_all(importlib, pkgutil) -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            if info.name.endswith("__main__"):
                continue
            with contextlib.suppress(ImportError):
                importlib.import_module(info.name)
    from scrapy.settings import default_settings
    from scrapy.utils.misc import load_object

    for name in dir(default_settings):  # the components a crawl loads by their path
        value = getattr(default_settings, name)
        for path in [*value.keys(), *value.values()] if isinstance(value, dict) else [value]:
            if isinstance(path, str) and path.startswith("scrapy.") and path.count(".") > 1:
                with contextlib.suppress(Exception):
                    load_object(path)


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < 4 or len(data) < 4 + struct.unpack("!I", data[:4])[0]:
        more = conn.recv(1 << 16)
        if not more:
            raise EOFError("the client went away mid-request")
        data += more
    size = struct.unpack("!I", data[:4])[0]
    return json.loads(data[4 : 4 + size]), fds


def _keep(conn: socket.socket, listener: socket.socket) -> tuple[dict, list[int]]:
    """In the keeper: fork the command's process, tell its pid, wait for it, tell how it ended.
    Returns only in the command's process, with the request and its streams."""
    request, fds = _receive(conn)
    pid = os.fork()
    if pid == 0:
        listener.close()
        conn.close()
        return request, fds
    for fd in fds:
        os.close(fd)
    with contextlib.suppress(OSError):
        conn.sendall(f"pid {pid}\n".encode())
    _pid, status, usage = os.wait4(pid, 0)
    with contextlib.suppress(OSError):
        cpu = usage.ru_utime + usage.ru_stime
        conn.sendall(f"exit {os.waitstatus_to_exitcode(status)} {cpu:.3f}\n".encode())
    os._exit(0)


def command(request: dict, fds: list[int]) -> None:
    """In the command's process: its streams, folder and environment, then the command, whose end is
    the interpreter's own (SystemExit, an uncaught exception's traceback, atexit, threads joined)."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    kind, target = request["kind"], request["target"]
    sys.argv = [*request["argv"]]
    if kind == "script":
        import runpy

        sys.path[0] = os.path.dirname(os.path.abspath(target))
        runpy.run_path(target, run_name="__main__")
    elif kind == "module":
        import importlib.util
        import runpy

        sys.path[0] = os.getcwd()
        # Imported here already, it would be run as a second copy of itself: runpy warns so.
        # Importing its package does not import it in a fresh interpreter (or it would warn there).
        spec = importlib.util.find_spec(target)
        sys.modules.pop(f"{target}.__main__" if spec.submodule_search_locations else target, None)
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.path[0] = ""
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main
        exec(compile(target, "<string>", "exec"), main.__dict__)


def serve(path: str) -> tuple[dict, list[int]]:
    """Import, then fork a keeper for each request until standard input closes (the client's
    end); returns only in a command's process. Keepers are waited for, so that the CPU time of
    the commands adds up in this process's parent, as a command run with subprocess does."""
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        ready = select.select([listener, sys.stdin], [], [], 1.0)[0]
        _reap()
        if sys.stdin in ready:  # the client is gone: so are its commands (it waited for them)
            _reap(block=True)
            os._exit(0)
        if listener not in ready:
            continue
        conn, _ = listener.accept()
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            try:
                return _keep(conn, listener)
            except BaseException:
                os._exit(70)
        conn.close()


def _reap(block: bool = False) -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, 0 if block else os.WNOHANG)[0]:
            pass


# ---- the client ---------------------------------------------------------------------------------


class _Server:
    """This process's fork server, started on first use and stopped when this process ends."""

    lock = threading.Lock()
    process: subprocess.Popen | None = None
    path = ""
    owner = 0

    @classmethod
    def address(cls) -> str:
        with cls.lock:
            if cls.process is None or cls.owner != os.getpid() or cls.process.poll() is not None:
                folder = tempfile.mkdtemp(prefix="neardup-forked-")
                cls.path = os.path.join(folder, "socket")
                cls.process = subprocess.Popen(
                    [sys.executable, __file__, cls.path],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                )  # fmt: skip
                cls.owner = os.getpid()
                line = cls.process.stdout.readline()
                if line.strip() != "ready":
                    raise RuntimeError(f"the fork server did not start (it said {line!r})")
                atexit.register(cls.stop, cls.process, folder)
            return cls.path

    @staticmethod
    def stop(process: subprocess.Popen, folder: str) -> None:
        process.stdin.close()  # the server reaps its keepers and ends
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(folder, "socket"))
            os.rmdir(folder)


def _parse(args) -> tuple[str, str, list[str]]:
    args = [os.fspath(a) for a in args]
    if len(args) < 2 or args[0] != sys.executable:
        raise ValueError(f"not a command of this Python: {args[:2]}")
    if args[1] == "-m" and len(args) > 2:
        return "module", args[2], [args[2], *args[3:]]  # argv[0] is the module's path in Python
    if args[1] == "-c" and len(args) > 2:
        return "code", args[2], ["-c", *args[3:]]
    if args[1].startswith("-"):
        raise ValueError(f"interpreter options are not forked: {args[1]}")
    return "script", args[1], args[1:]


cpu_seconds = 0.0  # the CPU time of the commands that ended, and of the processes they waited for


class Popen(subprocess.Popen):
    """``subprocess.Popen`` for a command of this Python, forked from the warm server."""

    def __init__(self, args, **kwargs) -> None:
        self._command = _parse(args)
        self._connection: socket.socket | None = None
        self._said = b""
        super().__init__(args, **kwargs)

    def _execute_child(  # the POSIX signature's first 17 parameters, the same from Python 3.10 on
        self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo, creationflags,
        shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite, *rest,
    ) -> None:  # fmt: skip
        _restore, gid, gids, uid, umask, new_session, *group = rest
        if preexec_fn or pass_fds or shell or executable or new_session or group not in ([], [-1], [None]):
            raise ValueError("forked.Popen: no preexec_fn, pass_fds, shell, executable or new session")
        if (gid, gids, uid) != (None, None, None) or umask != -1:
            raise ValueError("forked.Popen: no user, group or umask of its own")
        kind, target, argv = self._command
        if kind == "module":
            argv[0] = target  # runpy sets it to the module's file
        fds = [
            p2cread if p2cread != -1 else 0,
            c2pwrite if c2pwrite != -1 else 1,
            errwrite if errwrite != -1 else 2,
        ]
        request = {
            "kind": kind,
            "target": target,
            "argv": argv,
            "cwd": os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd(),
            "env": {os.fsdecode(k): os.fsdecode(v) for k, v in (os.environ if env is None else env).items()},
        }
        body = json.dumps(request).encode()
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(_Server.address())
            socket.send_fds(conn, [struct.pack("!I", len(body)) + body], fds)
            self._connection = conn
            self.pid = int(self._line(None).split()[1])
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _line(self, timeout: float | None) -> str | None:
        """The keeper's next line; None when none came within ``timeout`` (0: don't wait)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._said:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._connection.settimeout(left)
            try:
                chunk = self._connection.recv(256)
            except (TimeoutError, BlockingIOError):
                return None
            if not chunk:
                raise RuntimeError("the fork server's keeper went away")
            self._said += chunk
        line, self._said = self._said.split(b"\n", 1)
        return line.decode()

    def _ended(self, line: str) -> int:
        global cpu_seconds
        _exit, code, cpu = line.split()
        cpu_seconds += float(cpu)
        self.returncode = int(code)
        self._connection.close()
        return self.returncode

    def _internal_poll(self, _deadstate=None, **_ignored):
        if self.returncode is None and self._connection is not None:
            line = self._line(0)
            if line is not None:
                self._ended(line)
        return self.returncode

    def _wait(self, timeout):
        if self.returncode is not None:
            return self.returncode
        line = self._line(timeout)
        if line is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self._ended(line)


def run(args, *, input=None, capture_output=False, timeout=None, check=False, **kwargs):
    """``subprocess.run`` for a command of this Python, forked from the warm server."""
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with Popen(args, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done


if __name__ == "__main__":
    command(*serve(sys.argv[1]))
