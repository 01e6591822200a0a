"""Compile the stream path's hot modules with Cython, in place (``make setup`` runs it).

    python scripts/compile.py [--clean]

Each module of ``node.compiled.MODULES`` becomes an extension beside its ``.py`` (the same
source compiled: annotations are not taken as C types, so it behaves as the ``.py`` does;
a ``.pxd`` beside a module gives C types to the values it names, only where they fit),
then ``node/compiled.json`` records each source's hash (``.py`` and ``.pxd``). Only
modules whose source changed since (or that have no extension) are compiled again: with
nothing changed it does nothing.
Without Cython or a C compiler it says so and leaves the pure-Python modules in use (exit
0): setl runs the same, slower.
``--clean`` removes the extensions and the record.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from node import compiled  # noqa: E402 - after the project root is on the path

BUILD = ROOT / "build" / "cython"
DIRECTIVES = {"language_level": 3, "annotation_typing": False, "binding": True,
              "embedsignature": False, "always_allow_keywords": True}


def clean() -> None:
    for module in compiled.MODULES:
        found = compiled.extension_of(module)
        while found is not None:
            found.unlink()
            found = compiled.extension_of(module)
    compiled.MANIFEST.unlink(missing_ok=True)


def build() -> int:
    try:
        from Cython.Build import cythonize
        from setuptools import Extension, setup
    except ImportError as exc:
        print(f"compile: {exc.name} is not installed; the pure-Python modules stay in use "
              "(pip install cython)", file=sys.stderr)
        return 0
    if shutil.which(os.environ.get("CC", "gcc")) is None:
        print("compile: no C compiler (gcc); the pure-Python modules stay in use",
              file=sys.stderr)
        return 0
    started = time.monotonic()
    hashes = {module: compiled.digest(module) for module in compiled.MODULES}
    before = compiled.built()
    stale = [module for module in compiled.MODULES if before.get(module) != hashes[module]
             or compiled.extension_of(module) is None]
    if not stale:
        return 0
    compiled.MANIFEST.write_text(json.dumps(  # no record of what is being compiled again
        {m: h for m, h in before.items() if m not in stale and m in hashes}, indent=1) + "\n")
    extensions = [Extension(module, [str(compiled.source_of(module).relative_to(ROOT))])
                  for module in stale]
    here = Path.cwd()
    os.chdir(ROOT)
    try:
        setup(name="setl-compiled", ext_modules=cythonize(
                  extensions, build_dir=str(BUILD / "c"), compiler_directives=DIRECTIVES,
                  nthreads=os.cpu_count() or 1, quiet=True, force=True),
              script_args=["-q", "build_ext", "--inplace", "--build-temp", str(BUILD / "o"),
                           "--parallel", str(os.cpu_count() or 1)])
    except (SystemExit, Exception) as exc:  # a compiler error: say it, keep the pure path
        clean()
        print(f"compile: the build failed ({exc}); the pure-Python modules stay in use",
              file=sys.stderr)
        return 0
    finally:
        os.chdir(here)
    compiled.MANIFEST.write_text(json.dumps(hashes, indent=1) + "\n")
    print(f"compile: {len(stale)} of {len(hashes)} modules compiled in "
          f"{time.monotonic() - started:.0f} s ({', '.join(stale)})")
    return 0


def main(argv: list[str]) -> int:
    if "--clean" in argv:
        clean()
        return 0
    return build()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
