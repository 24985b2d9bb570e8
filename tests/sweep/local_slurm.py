"""A real one-node Slurm cluster on this machine for the launcher's tests: munged, slurmctld and slurmd from
Debian's packages (munge, slurmctld, slurmd, slurm-client), started as root in a temporary folder with their own
ports, socket and key, CPUs only, no accounting (so sacct answers "disabled": the launcher must do without it).

:func:`start_cluster` returns the running cluster or the one-line reason it cannot start here; ``.ci/run``
installs the packages and sets ``AOT_REQUIRE_SLURM=1`` so that CI fails rather than skips."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo")


@dataclass
class LocalSlurm:
    folder: Path
    conf: Path

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def run(self, *command: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **self.env}
        return subprocess.run(list(command), capture_output=True, text=True, env=env, timeout=60, check=False)

    def stop(self) -> None:
        self.run("scancel", "-u", "root")
        for name in ("slurmd", "slurmctld", "munged"):
            pid_file = self.folder / f"{name}.pid"
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text().strip()), 15)


def _daemon(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}",) if os.path.exists(p)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(int(line.split()[1]) / 1024 * 0.8)
    return 4000


def start_cluster(folder: Path) -> LocalSlurm | str:
    """Start munged, slurmctld and slurmd in ``folder``; the cluster, or why it cannot start (one line)."""
    missing = [name for name in DAEMONS if _daemon(name) is None] + [n for n in CLIENTS if not shutil.which(n)]
    if missing:
        return f"Slurm is not installed here ({', '.join(missing)} missing: apt-get install munge slurmctld slurmd)"
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root (slurmd runs jobs as their user)"
    for sub in ("state", "spool", "log"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    socket_path = folder / "munge.socket"
    munged = [_daemon("munged"), "--force", f"--socket={socket_path}", f"--key-file={key}",
              f"--log-file={folder / 'log' / 'munged.log'}", f"--pid-file={folder / 'munged.pid'}",
              f"--seed-file={folder / 'munged.seed'}"]  # fmt: skip
    host = socket.gethostname().split(".")[0]
    conf = folder / "slurm.conf"
    conf.write_text(
        "\n".join(
            [
                "ClusterName=aot-test",
                f"SlurmctldHost={host}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                f"AuthInfo=socket={socket_path}",
                "CredType=cred/munge",
                f"StateSaveLocation={folder / 'state'}",
                f"SlurmdSpoolDir={folder / 'spool'}",
                f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
                f"SlurmdPidFile={folder / 'slurmd.pid'}",
                f"SlurmctldLogFile={folder / 'log' / 'slurmctld.log'}",
                f"SlurmdLogFile={folder / 'log' / 'slurmd.log'}",
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={_free_port()}",
                "ProctrackType=proctrack/pgid",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_CPU_Memory",
                "SchedulerType=sched/backfill",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "MpiDefault=none",
                "ReturnToService=2",
                "KillWait=1",  # SIGKILL 1 s after SIGTERM, which a submitit job ignores (Slurm default: 30 s)
                "MinJobAge=600",
                f"NodeName={host} CPUs={os.cpu_count() or 1} RealMemory={_memory_mb()} State=UNKNOWN",
                f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    cluster = LocalSlurm(folder, conf)
    env = {**os.environ, **cluster.env}
    for command in (munged, [_daemon("slurmctld"), "-f", str(conf)], [_daemon("slurmd"), "-f", str(conf)]):
        started = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)
        if started.returncode != 0:
            cluster.stop()
            return f"{Path(str(command[0])).name} did not start: {(started.stderr or started.stdout).strip()[:200]}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the node registers with the controller
        state = cluster.run("sinfo", "-h", "-o", "%T")
        if state.returncode == 0 and state.stdout.strip() in ("idle", "mixed", "allocated"):
            return cluster
        time.sleep(0.5)
    cluster.stop()
    return f"the local Slurm node did not come up in 30 s (see {folder / 'log'})"
