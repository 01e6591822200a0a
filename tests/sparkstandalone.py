"""A Spark standalone cluster (one master, N workers) from the pyspark installation, bound to
127.0.0.1 on free ports: what the scale-out test and a local try of ``spark.master:
spark://…`` run on. The processes die with their parent."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from shared.errors import SetlError
from shared.sandbox import dying_with_parent, free_port


def spark_home() -> Path:
    import pyspark  # the pip package carries Spark's jars and bin/spark-class

    return Path(pyspark.__file__).resolve().parent


class SparkStandalone:
    """``with SparkStandalone(workdir, workers=2) as spark: spark.master_url``."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1,
                 memory: str = "1g") -> None:  # an executor asks for 1g by default
        self.workdir, self.workers, self.cores, self.memory = workdir, workers, cores, memory
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self._processes: list[subprocess.Popen[bytes]] = []

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        home = spark_home()
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable, "SPARK_WORKER_DIR": str(self.workdir / name),
               "SPARK_LOG_DIR": str(self.workdir),
               # no REST submission server (it listens on 6066, not a free port)
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        log = open(self.workdir / f"{name}.log", "ab")
        process = subprocess.Popen(
            dying_with_parent([str(home / "bin" / "spark-class"), *args]), stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        self._processes.append(process)
        return process

    def _start_master(self, timeout_s: float) -> None:
        """The master on a free port. A free port can be taken between the probe and the
        bind, and Spark then binds the next one up: the master is started again on another
        port (three tries), so that no worker registers with whatever holds ours."""
        log = self.workdir / "master.log"
        for _ in range(3):
            said = log.stat().st_size if log.exists() else 0
            master = self._start("master", "org.apache.spark.deploy.master.Master", "--host",
                                 "127.0.0.1", "--port", str(self.port), "--webui-port",
                                 str(free_port()))
            deadline, found = time.monotonic() + timeout_s, None
            while found is None and master.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
                text = log.read_bytes()[said:].decode(errors="replace") if log.exists() else ""
                found = re.search(r"Starting Spark master at spark://127\.0\.0\.1:(\d+)", text)
            if found is not None and int(found.group(1)) == self.port:
                return
            self.stop()
            self.port = free_port()
            self.master_url = f"spark://127.0.0.1:{self.port}"
        raise SetlError(f"the Spark standalone master did not start on a free port; see {log}")

    def start(self, timeout_s: float = 90.0) -> None:
        self._start_master(timeout_s)
        for n in range(1, self.workers + 1):
            self._start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker",
                        self.master_url, "--host", "127.0.0.1", "--cores", str(self.cores),
                        "--memory", self.memory, "--webui-port", str(free_port()),
                        "--work-dir", str(self.workdir / f"worker-{n}"))
        self.wait_registered(timeout_s)

    def wait_registered(self, timeout_s: float) -> None:
        """Until every worker's log says the master took its registration. (The master's
        own "Registering worker" line is not enough: a worker that registers before the
        master is elected leader gets no answer and tries again only seconds later, so an
        application started meanwhile gets one worker.)"""
        deadline = time.monotonic() + timeout_s
        logs = [self.workdir / f"worker-{n}.log" for n in range(1, self.workers + 1)]
        while time.monotonic() < deadline:
            if all(log.exists() and "Successfully registered with master" in
                   log.read_text(errors="replace") for log in logs):
                return
            if any(p.poll() is not None for p in self._processes):
                break
            time.sleep(0.2)
        self.stop()
        raise SetlError(f"the Spark standalone cluster at {self.master_url} did not come up "
                        f"with {self.workers} workers within {timeout_s:.0f}s; see the logs "
                        f"in {self.workdir}")

    def stop(self) -> None:
        for process in reversed(self._processes):
            if process.poll() is None:
                process.terminate()
        for process in self._processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        self._processes.clear()

    def __enter__(self) -> SparkStandalone:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
