"""A real, private Slurm on this machine, for the bridge's integration test.

One slurmctld and one ``slurmd -N nX`` per emulated node, each on its own
port on 127.0.0.1, a private munged (own key and socket), and fake GPUs:
GRES ``File=`` entries are symlinks to /dev/null (22.05 drops a GPU without
a device file). Every daemon runs in the foreground as our child, so it is
stopped by its PID; job step processes outlive slurmd and are found by the
``SLURM_CONF`` in their environment and killed by PID too.

Facts this relies on: /work/shared/notes/SLURM_LOCAL.md.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from whale_opt.slurm import JOB_SUBMIT_LUA

BINARIES = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "sinfo", "scontrol")
GPUS_PER_NODE = 8


def missing_binaries() -> list[str]:
    """The Slurm and munge programs not on PATH (empty: a real Slurm can run)."""
    return [name for name in BINARIES if shutil.which(name) is None]


def _free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now."""
    sockets, ports = [], []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
        ports.append(sock.getsockname()[1])
    for sock in sockets:
        sock.close()
    return ports


def _node_gres(mode: str) -> str:
    if mode == "indexed":
        return ",".join(f"gpu:g{i}:1" for i in range(GPUS_PER_NODE))
    return f"gpu:a100:{GPUS_PER_NODE}"


@dataclass
class LocalSlurm:
    """A private Slurm cluster of ``nodes`` nodes with 8 fake GPUs each.

    ``mode`` is the GRES layout: ``plain`` (``gpu:a100:8``) or ``indexed``
    (``gpu:g0:1,...,gpu:g7:1``: one GRES type per GPU index).
    """

    root: Path
    nodes: int = 4
    mode: str = "indexed"
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def node_names(self) -> list[str]:
        """n1, n2, ..."""
        return [f"n{k}" for k in range(1, self.nodes + 1)]

    @property
    def env(self) -> dict[str, str]:
        """The environment every Slurm command of this cluster needs."""
        return {**os.environ, "SLURM_CONF": str(self.root / "etc" / "slurm.conf")}

    # -- configuration ------------------------------------------------------

    def write_config(self) -> None:
        """slurm.conf, gres.conf, job_submit.lua, fake devices, munge key."""
        r = self.root
        for sub in ("etc", "munge", "spool/ctld", "log", "run", "dev", "out"):
            (r / sub).mkdir(parents=True, exist_ok=True)
        (r / "munge").chmod(0o711)
        for i in range(GPUS_PER_NODE):
            device = r / "dev" / f"nvidia{i}"
            if not device.is_symlink():
                device.symlink_to("/dev/null")
        key = r / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
        ctld_port, *node_ports = _free_ports(1 + self.nodes)
        features = "a100" if self.mode == "indexed" else ""
        lines = [
            "ClusterName=whaletest",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={node_ports[0]}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={r}/munge/munge.socket,cred_expire=5",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={r}/spool/ctld",
            f"SlurmdSpoolDir={r}/spool/slurmd.%n",
            f"SlurmctldPidFile={r}/run/slurmctld.pid",
            f"SlurmdPidFile={r}/run/slurmd.%n.pid",
            f"SlurmctldLogFile={r}/log/slurmctld.log",
            f"SlurmdLogFile={r}/log/slurmd.%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "ReturnToService=2",
            "KillWait=2",
            "MinJobAge=600",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            "JobSubmitPlugins=lua",
            "SlurmdParameters=config_overrides",
        ]
        for name, port in zip(self.node_names, node_ports, strict=True):
            feature = f" Features={features}" if features else ""
            lines.append(
                f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port}"
                f" CPUs=16 RealMemory=64000 Gres={_node_gres(self.mode)}{feature} State=UNKNOWN"
            )
        lines.append(
            f"PartitionName=gpu Nodes=n[1-{self.nodes}] Default=YES MaxTime=INFINITE State=UP"
        )
        (r / "etc" / "slurm.conf").write_text("\n".join(lines) + "\n")
        nodes = f"n[1-{self.nodes}]"
        if self.mode == "indexed":
            gres = [
                f"NodeName={nodes} Name=gpu Type=g{i} File={r}/dev/nvidia{i}"
                for i in range(GPUS_PER_NODE)
            ]
        else:
            gres = [f"NodeName={nodes} Name=gpu Type=a100 File={r}/dev/nvidia[0-7]"]
        (r / "etc" / "gres.conf").write_text("AutoDetect=off\n" + "\n".join(gres) + "\n")
        shutil.copyfile(JOB_SUBMIT_LUA, r / "etc" / "job_submit.lua")

    # -- daemons ------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.root / "log" / f"{name}.stdout").open("ab")
        self.processes[name] = subprocess.Popen(
            argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def start(self, deadline_s: float = 30.0) -> None:
        """Start munged, slurmctld and every slurmd; wait until all nodes are idle."""
        self.write_config()
        r = self.root
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--socket={r}/munge/munge.socket",
                f"--key-file={r}/munge/munge.key",
                f"--log-file={r}/munge/munged.log",
                f"--pid-file={r}/munge/munged.pid",
                f"--seed-file={r}/munge/munged.seed",
            ],
        )
        self._wait(lambda: (r / "munge" / "munge.socket").exists(), 5.0, "munged socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self._wait(self._controller_up, deadline_s, "slurmctld answering")
        for name in self.node_names:
            self._spawn(f"slurmd.{name}", ["slurmd", "-D", "-N", name])
        self._wait(self._all_idle, deadline_s, "every node idle")

    def _alive(self, name: str) -> bool:
        process = self.processes.get(name)
        return process is not None and process.poll() is None

    def _controller_up(self) -> bool:
        if not self._alive("slurmctld"):
            log = (self.root / "log" / "slurmctld.log").read_text(errors="replace")
            raise RuntimeError(f"slurmctld exited:\n{log[-2000:]}")
        return self.run(["scontrol", "ping"], timeout=3.0, check=False).returncode == 0

    def _all_idle(self) -> bool:
        states = self.run(["sinfo", "-h", "-N", "-o", "%T"], timeout=3.0, check=False)
        return states.returncode == 0 and set(states.stdout.split()) == {"idle"}

    @staticmethod
    def _wait(ready: object, deadline_s: float, what: str) -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if ready():  # type: ignore[operator]
                return
            time.sleep(0.1)
        raise TimeoutError(f"local slurm: no {what} after {deadline_s} s")

    def run(
        self, argv: list[str], *, timeout: float = 10.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run one Slurm command against this cluster (bounded by ``timeout``)."""
        done = subprocess.run(
            argv, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()}")
        return done

    def stop(self) -> None:
        """Cancel every job, stop every daemon and job step we started, by PID."""
        if self._alive("slurmctld"):
            with contextlib.suppress(Exception):
                self.run(["scancel", "--full", "-u", "root"], timeout=5.0, check=False)
        order = [n for n in self.processes if n.startswith("slurmd.")] + ["slurmctld", "munged"]
        for name in order:
            process = self.processes.get(name)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                process.kill()  # e.g. a slurmd still retrying to register
                process.wait(timeout=5.0)
        end = time.monotonic() + 5.0
        while (leftover := self.leftover_pids()) and time.monotonic() < end:
            for pid in leftover:  # job steps outlive slurmd and ignore SIGTERM
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def leftover_pids(self) -> list[int]:
        """PIDs of processes (job steps, job scripts) that carry our SLURM_CONF."""
        marker = f"SLURM_CONF={self.root / 'etc' / 'slurm.conf'}".encode()
        own = os.getpid()
        out = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == own:
                continue
            try:
                environ = (entry / "environ").read_bytes()
                status = (entry / "status").read_text()
            except OSError:
                continue
            if "State:\tZ" in status:
                continue
            if marker in environ.split(b"\0"):
                out.append(int(entry.name))
        return out


@contextlib.contextmanager
def local_slurm(root: Path, *, nodes: int = 4, mode: str = "indexed") -> Iterator[LocalSlurm]:
    """A started :class:`LocalSlurm`, stopped (every daemon, by PID) on exit."""
    cluster = LocalSlurm(root, nodes=nodes, mode=mode)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
