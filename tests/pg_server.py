"""A throwaway PostgreSQL server on 127.0.0.1, for the tests, the benchmarks and the demo.

    python tests/pg_server.py FOLDER     # start one, print its URL (stop: pg_ctl -D FOLDER/data stop)

initdb and pg_ctl run in a folder of their own; as root (CI), as the ``postgres`` user, since
PostgreSQL refuses to run as root. fsync is off: nothing here outlives its run.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path


class Unavailable(Exception):
    """No PostgreSQL here, with the reason."""


def bin_dir() -> Path:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if not versions:
        raise Unavailable("PostgreSQL is not installed (apt-get install postgresql; .ci/run installs it)")
    return Path(versions[-1]).parent


def _as_owner(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    if shutil.which("runuser") is None:
        raise Unavailable("running as root without runuser: PostgreSQL will not run as root")
    return ["runuser", "-u", "postgres", "--", *command]


def start(folder: str | None = None, extra: str = "") -> tuple[str, Path]:
    """Start a server in ``folder`` (a new temporary one by default), with ``extra`` lines added to its
    postgresql.conf; its URL and data folder."""
    bins = bin_dir()
    home = Path(folder or tempfile.mkdtemp(prefix="neardup-pg-"))
    home.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        try:
            shutil.chown(home, "postgres", "postgres")
        except (LookupError, OSError) as exc:
            raise Unavailable(f"cannot hand {home} to the postgres user ({exc})") from None
    data = home / "data"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _run([str(bins / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
    with open(data / "postgresql.conf", "a") as conf:  # kept for a restart
        conf.write(
            f"\nport = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{home}'\n"
            f"fsync = off\nmax_connections = 50\n{extra}"
        )
    restart(data)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", data


def _run(command: list[str]) -> None:
    done = subprocess.run(_as_owner(command), capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise Unavailable(f"{Path(command[0]).name} failed: {(done.stderr or done.stdout).strip()[-500:]}")


def stop(data: Path, mode: str = "immediate", remove: bool = True) -> None:
    """Stop the server; with ``remove``, its folder goes too."""
    subprocess.run(
        _as_owner([str(bin_dir() / "pg_ctl"), "-D", str(data), "-m", mode, "stop"]),
        capture_output=True, timeout=60,
    )  # fmt: skip
    if remove:
        shutil.rmtree(data.parent, ignore_errors=True)


def restart(data: Path) -> None:
    """Start the server (again), on its port."""
    _run([str(bin_dir() / "pg_ctl"), "-D", str(data), "-l", str(data.parent / "log"), "-w", "start"])


if __name__ == "__main__":
    try:
        url, _ = start(sys.argv[1] if len(sys.argv) > 1 else None)
    except Unavailable as exc:
        sys.exit(f"pg_server: {exc}")
    print(url)
