"""setl installs as a package: a built wheel holds the product (and nothing of its tests or
benchmarks) with the files it reads at run time, and gives `setl`, `setl-manager` and
`setl-node`, each answering --version."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_built_wheel_installs_the_three_commands(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(tmp_path / "dist"), str(ROOT)],
                   check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("setl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "node/log4j2.properties" in names and "shared/rpc/manager_pb2.py" in names
    assert not [name for name in names if name.startswith(("tests/", "bench/", "scripts/"))]

    # a fresh environment holding the wheel alone; its dependencies are this one's
    # (read through a path file: the editable install of the checkout is not on it, nor is
    # the checkout through PYTHONPATH, where the build's egg-info says setl is installed)
    clean = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    site = Path(subprocess.run(
        [env / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"),
                    "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, env=clean)
    version = subprocess.run([env / "bin" / "python", "-c", "import importlib.metadata as m; "
                              "print(m.version('setl'))"], check=True, capture_output=True,
                             text=True, env=clean).stdout.strip()
    for command in ("setl", "setl-manager", "setl-node"):
        answer = subprocess.run([env / "bin" / command, "--version"], capture_output=True,
                                text=True, cwd=tmp_path, env=clean)
        assert answer.returncode == 0, answer.stderr
        assert answer.stdout.strip() == f"{command} {version}"
    where = subprocess.run([env / "bin" / "python", "-c", "import node; print(node.__file__)"],
                           check=True, capture_output=True, text=True, cwd=tmp_path,
                           env=clean).stdout
    assert where.startswith(str(site)), where  # the installed copy, not the checkout
