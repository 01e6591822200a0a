"""What a definition may reach: password files under the secret directories only (after
``..`` and symlinks), variables with the prefix only, processors from the processor
directories only — refused with a message that says what to do, before anything is read."""

from __future__ import annotations

import dataclasses
import gc
import pickle
import sys
import threading
import types
from pathlib import Path

import pytest

from node.changes import ChangeType, RowChange
from node.extract import processors
from shared import confinement, definitions
from shared.confinement import Confinement
from shared.errors import ConfigError, SecretError, TransformError
from shared.secrets import SecretRef


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A secret directory holding a password, and a file outside it."""
    inside, outside = tmp_path / "secrets", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (inside / "db").write_text("inside-pw\n")
    (outside / "shadow").write_text("outside-pw\n")
    return inside, outside


def test_a_file_in_a_secret_directory_is_read(dirs: tuple[Path, Path]) -> None:
    inside, _ = dirs
    assert SecretRef(f"file:{inside}/db").resolve({}, Confinement((inside,))) == "inside-pw"


@pytest.mark.parametrize("how", ["absolute", "dot-dot", "symlink"])
def test_a_file_outside_is_refused_without_being_read(dirs: tuple[Path, Path], how: str) -> None:
    inside, outside = dirs
    named = {"absolute": outside / "shadow",
             "dot-dot": inside / ".." / "elsewhere" / "shadow",
             "symlink": inside / "link"}[how]
    if how == "symlink":
        named.symlink_to(outside / "shadow")
    with pytest.raises(SecretError) as caught:
        SecretRef(f"file:{named}").resolve({}, Confinement((inside,)))
    message = str(caught.value)
    assert message.startswith(f"password reference file:{named}: this machine reads password "
                              f"files only under {inside} (its 'security' settings: "
                              f"secret_dirs); {named} is outside")
    assert "outside-pw" not in message
    if how != "absolute":
        assert f"(it leads to {outside / 'shadow'})" in message


def test_a_relative_file_outside_says_where_a_relative_path_is_read_from(
        dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon's ``token: file:secrets/t`` beside its configuration, run from another
    directory: the message said only "secrets/t is outside", the file being in the secret
    directory (the path is read from the working directory, which is not said)."""
    inside, outside = dirs
    monkeypatch.chdir(outside)
    with pytest.raises(SecretError) as caught:
        SecretRef("file:secrets/t").resolve({}, Confinement((inside,)))
    message = str(caught.value)
    assert "secrets/t is outside (a relative path is read from the working directory of the " \
        "process that reads it, not from the configuration file's: give it absolute)" in \
        message, message
    assert str(outside) not in message  # the working directory itself is not told


def test_a_symlink_within_the_directory_is_fine(dirs: tuple[Path, Path]) -> None:
    inside, _ = dirs
    (inside / "current").symlink_to(inside / "db")
    assert SecretRef(f"file:{inside}/current").resolve({}, Confinement((inside,))) == \
        "inside-pw"


def test_only_variables_with_the_prefix_are_read() -> None:
    rules = Confinement(env_prefix="SETL_")
    assert SecretRef("${SETL_PW}").resolve({"SETL_PW": "pw"}, rules) == "pw"
    with pytest.raises(SecretError) as caught:
        SecretRef("${HOME}").resolve({"HOME": "/root"}, rules)
    assert str(caught.value) == (
        "password reference ${HOME}: this machine reads only environment variables whose "
        "name starts with SETL_ (its 'security' settings: env_prefix); export the password "
        "as SETL_HOME and refer to ${SETL_HOME}")
    assert SecretRef("${ACME_PW}").resolve({"ACME_PW": "a"}, Confinement(env_prefix="ACME_")) \
        == "a"


def test_the_process_rules_apply_by_default(dirs: tuple[Path, Path]) -> None:
    inside, outside = dirs
    before = confinement.current()
    try:
        confinement.confine(Confinement((inside,)))
        assert SecretRef(f"file:{inside}/db").resolve({}) == "inside-pw"
        with pytest.raises(SecretError):
            SecretRef(f"file:{outside}/shadow").resolve({})
    finally:
        confinement.confine(before)


@pytest.fixture
def procs(tmp_path: Path) -> Confinement:
    folder = tmp_path / "procs"
    folder.mkdir()
    (folder / "cleanup.py").write_text("def upper(change):\n"
                                       "    after = change['after']\n"
                                       "    after['name'] = after['name'].upper()\n"
                                       "    return change\n"
                                       "def _hidden(change):\n    return None\n")
    (folder / "json.py").write_text("def loads(change):\n    return change\n")
    return Confinement(processor_dirs=(folder,))


@pytest.mark.parametrize("name, problem", [
    ("os:getpid", "module os is not in the processor directories"),
    ("subprocess:run", "module subprocess is not in the processor directories"),
    ("pymysql.connections:Connection", "module pymysql is not in the processor directories"),
    ("cleanup:_hidden", "a name starting with '_' is private"),
    ("_private:f", "a name starting with '_' is private"),
    ("cleanup._x:f", "a name starting with '_' is private"),
    ("x/../../../tmp/evil:f", "expected module:function made of Python names"),
    ("cleanup:f.g", "expected module:function made of Python names"),
    ("cleanup.:f", "expected module:function made of Python names"),
])
def test_processors_outside_the_directories_or_private_are_refused(
        procs: Confinement, name: str, problem: str) -> None:
    found = procs.processor_problem(name)
    assert found is not None and found.startswith(f"processor {name}: ") and problem in found
    with pytest.raises(ImportError):
        procs.load_module(name)


def test_a_processor_in_a_directory_runs(procs: Confinement) -> None:
    before = confinement.current()
    try:
        confinement.confine(procs)
        change = RowChange("s", "t", ChangeType.INSERT, ("id",), None, {"id": 1, "name": "ann"})
        [out] = processors.run_processor("cleanup:upper", change, "pipeline p pair s.t")
        assert out.after == {"id": 1, "name": "ANN"}
    finally:
        confinement.confine(before)


def test_a_module_named_like_a_standard_one_is_refused(procs: Confinement) -> None:
    problem = procs.processor_problem("json:loads")
    assert problem is not None and problem.startswith("processor json:loads: module json (")
    assert problem.endswith("has the name of a module of Python's standard library; give "
                            "your module another name")
    with pytest.raises(TransformError) as caught:
        processors._load("json:loads", procs)
    assert problem in str(caught.value)
    assert not Path(sys.modules["json"].__file__).is_relative_to(procs.processor_dirs[0])


def test_an_installed_module_of_the_same_name_is_never_run(
        procs: Confinement, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A processor named like a module installed elsewhere on sys.path is refused without
    importing either: the installed one would record that it ran."""
    site, ran = tmp_path / "site", tmp_path / "ran"
    site.mkdir()
    (site / "acmelib.py").write_text(f"open({str(ran)!r}, 'w').close()\ndef f(c):\n    return c\n")
    folder = procs.processor_dirs[0]
    (folder / "acmelib.py").write_text("def f(change):\n    return change\n")
    monkeypatch.syspath_prepend(str(site))
    problem = procs.processor_problem("acmelib:f")
    assert problem == (f"processor acmelib:f: module acmelib ({folder / 'acmelib.py'}) has "
                       f"the name of an installed module ({site / 'acmelib.py'}); give your "
                       "module another name")
    with pytest.raises(ImportError):
        procs.load_module("acmelib:f")
    assert not ran.exists() and "acmelib" not in sys.modules


def test_a_module_named_like_setl_itself_is_refused(
        procs: Confinement, monkeypatch: pytest.MonkeyPatch) -> None:
    """setl's own packages may be found by an editable install's finder rather than through
    sys.path: those count as installed too."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path
                                      if Path(entry or ".").resolve() != root])
    (procs.processor_dirs[0] / "manager.py").write_text("def f(change):\n    return change\n")
    problem = procs.processor_problem("manager:f")
    assert problem is not None and problem.endswith(
        f"has the name of an installed module ({root / 'manager' / '__init__.py'}); give your "
        "module another name")


def test_a_processor_module_runs_from_its_file_not_from_sys_path(
        procs: Confinement, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = procs.processor_dirs[0]
    package = folder / "acmeproc"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rows.py").write_text("import acmehelper\n"
                                     "def tag(change):\n"
                                     "    change['after']['tag'] = acmehelper.TAG\n"
                                     "    return change\n")
    (folder / "acmehelper.py").write_text("TAG = 'from the processor directory'\n")
    monkeypatch.setattr(sys, "path", list(sys.path))  # the loader appends the directories
    try:
        module = procs.load_module("acmeproc.rows:tag")
        assert Path(module.__file__).resolve() == (package / "rows.py").resolve()
        assert module.tag({"after": {}})["after"] == {"tag": "from the processor directory"}
    finally:
        for name in ("acmeproc", "acmeproc.rows", "acmehelper"):
            sys.modules.pop(name, None)


def test_a_folder_without_init_is_refused(procs: Confinement) -> None:
    folder = procs.processor_dirs[0]
    (folder / "loose").mkdir()
    (folder / "loose" / "rows.py").write_text("def f(change):\n    return change\n")
    assert procs.processor_problem("loose.rows:f") == (
        "processor loose.rows:f: loose in the processor directories is a folder without "
        "__init__.py; add one to make it a package")


def test_a_processor_whose_import_fails_says_so(procs: Confinement) -> None:
    folder = procs.processor_dirs[0]
    (folder / "acmebroken.py").write_text("raise RuntimeError('no config here')\n")
    with pytest.raises(TransformError) as caught:
        processors._load("acmebroken:f", procs)
    assert str(caught.value) == ("processor acmebroken:f: importing its module failed: "
                                 "RuntimeError: no config here")
    assert "acmebroken" not in sys.modules


DEFINITION = """\
sources:
  - {name: src, host: 127.0.0.1, password: "file:/etc/shadow"}
  - {name: dst, host: 127.0.0.1, password: "${HOME}"}
channels:
  - name: c
    pipelines:
      - name: p
        source: src
        target: dst
        pairs:
          - {source: s.t, target: s.t, processor: "os:getpid"}
"""


def test_apply_names_file_line_and_field_of_each_refused_reference(tmp_path: Path) -> None:
    rules = Confinement((tmp_path,))
    with pytest.raises(ConfigError) as caught:
        definitions.load_text(DEFINITION, "c.yaml", rules=rules)
    found = [(issue.line, issue.path, issue.message.split(":")[0])
             for issue in caught.value.issues]
    assert found == [(2, "sources[0].password", "password reference file"),
                     (3, "sources[1].password", "password reference ${HOME}"),
                     (11, "channels[0].pipelines[0].pairs[0].processor", "processor os")]
    assert "secret_dirs" in caught.value.issues[0].message
    assert "env_prefix" in caught.value.issues[1].message
    assert "processor_dirs" in caught.value.issues[2].message
    # without rules (a file read for its shape only), the same text parses
    assert definitions.load_text(DEFINITION, "c.yaml").sources[0].name == "src"


def test_apply_refuses_tls_files_outside_the_secret_directories(tmp_path: Path) -> None:
    inside = tmp_path / "secrets"
    text = ("sources:\n"
            f"  - {{name: a, host: h, tls: {{ca: {inside}/ca.pem, cert: /etc/ssl/c.pem, "
            f"key: {inside}/../k.pem}}}}\n"
            f"  - {{name: b, host: h, tls: {{ca: ca.pem}}}}\n")
    with pytest.raises(ConfigError) as caught:
        definitions.load_text(text, "t.yaml", rules=Confinement((inside,)))
    assert [(issue.line, issue.path) for issue in caught.value.issues] == [
        (2, "sources[0].tls.cert"), (2, "sources[0].tls.key"), (3, "sources[1].tls.ca")]
    assert all("reads TLS files only under" in issue.message for issue in caught.value.issues)


class Shipped:
    """What a Spark task gets from the driver: the broadcast's value, pickled and loaded."""

    def __init__(self, value: object) -> None:
        self.value = pickle.loads(pickle.dumps(value))


def test_a_spark_task_runs_under_the_rules_shipped_with_the_pipeline(tmp_path: Path) -> None:
    """A worker process has only the defaults (conf/processors); it must apply the node's
    rules, which travel in the compiled pipeline, before any processor is loaded."""
    from node.extract.etl import CompiledPipeline
    from node.extract.job import Part
    from node.jobs import JobSpec
    from node.sparktasks import run_partition
    from tests.unit.test_etl import pipeline

    job = CompiledPipeline.compile("shop.fwd", 1, pipeline(
        "{source: s.t, target: s2.t, processor: 'setl_examples:mask_email'}"))
    change = RowChange("s", "t", ChangeType.INSERT, ("id",), None, {"id": 1, "email": "a@b.org"})
    node_rules = Confinement(processor_dirs=(tmp_path,))  # this node lists only tmp_path
    spec = JobSpec(1, False, changes_only=True)
    before = confinement.current()
    try:
        with pytest.raises(TransformError) as caught:
            run_partition(Shipped(dataclasses.replace(job, rules=node_rules)), [spec], {}, "", 0,
                           [Part.of_changes([change])])
        assert "processor setl_examples:mask_email: module setl_examples is not in the " \
               f"processor directories of this machine ({tmp_path};" in str(caught.value)
        assert confinement.current() == node_rules
        [result] = run_partition(Shipped(job), [spec], {}, "", 0, [Part.of_changes([change])])
        [out] = result.changes  # rules that list conf/processors
        assert out.after["email"].endswith("@b.org") and out.after["email"] != "a@b.org"
    finally:
        gc.unfreeze()
        confinement.confine(before)


def test_threads_loading_one_processor_at_once_all_get_the_whole_module(
        procs: Confinement) -> None:
    """The node runs E/T in several threads: one that asks while another still executes the
    module waits for it instead of finding a module without its functions."""
    gate = types.ModuleType("acmegate")
    gate.entered, gate.release = threading.Event(), threading.Event()  # type: ignore[attr-defined]
    sys.modules["acmegate"] = gate
    (procs.processor_dirs[0] / "acmeslow.py").write_text(
        "import acmegate\nacmegate.entered.set()\nacmegate.release.wait(30)\n"
        "def f(change):\n    return change\n")
    found: dict[str, object] = {}

    def load(who: str) -> None:
        found[who] = getattr(procs.load_module("acmeslow:f"), "f", None)

    first = threading.Thread(target=load, args=("first",), daemon=True)
    second = threading.Thread(target=load, args=("second",), daemon=True)
    try:
        first.start()
        assert gate.entered.wait(30)  # type: ignore[attr-defined]
        second.start()  # while the module is half executed
        gate.release.set()  # type: ignore[attr-defined]
        first.join(30)
        second.join(30)
        assert callable(found["first"]) and found["second"] is found["first"]
    finally:
        gate.release.set()  # type: ignore[attr-defined]
        for name in ("acmegate", "acmeslow"):
            sys.modules.pop(name, None)


def test_a_refusal_does_not_say_where_links_outside_the_secret_directories_lead(
        dirs: tuple[Path, Path]) -> None:
    """Whoever applies sees the refusal: it must not map the machine's symlinks for them
    (/proc/self/cwd would give the daemon's working directory)."""
    inside, outside = dirs
    (outside / "cwd").symlink_to(inside)
    message = Confinement((inside,)).secret_problem(f"file:{outside}/cwd/../x")
    assert message is not None
    assert message.endswith(f"{outside}/cwd/../x is outside (it leads to {outside / 'x'}). "
                            "Put the file there, or have the operator add its directory to "
                            "secret_dirs")
    assert str(inside.parent / "x") not in message  # where the link really leads
    message = Confinement((inside,)).secret_problem("file:/proc/self/cwd")
    assert message is not None and "leads to" not in message


def test_a_package_already_loaded_from_elsewhere_runs_none_of_its_submodules(
        procs: Confinement, tmp_path: Path) -> None:
    """A module made at run time (no finder knows it) has the package's name: the processor
    is refused before 'acmedyn.sub' is looked for in that module's folder and executed."""
    outside, ran = tmp_path / "outside", tmp_path / "ran"
    outside.mkdir()
    (outside / "sub.py").write_text(f"open({str(ran)!r}, 'w').close()\ndef f(c):\n    return c\n")
    package = procs.processor_dirs[0] / "acmedyn"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sub.py").write_text("def f(change):\n    return change\n")
    made = types.ModuleType("acmedyn")
    made.__path__ = [str(outside)]
    sys.modules["acmedyn"] = made
    try:
        with pytest.raises(ImportError) as caught:
            procs.load_module("acmedyn.sub:f")
        assert str(caught.value) == ("processor acmedyn.sub:f: a module named acmedyn is "
                                     "already loaded from no file, outside the processor "
                                     "directories; give your module another name")
        assert not ran.exists() and "acmedyn.sub" not in sys.modules
    finally:
        sys.modules.pop("acmedyn", None)


def test_only_a_function_the_module_defines_is_a_processor(procs: Confinement) -> None:
    (procs.processor_dirs[0] / "rowtools.py").write_text(
        "from os import system\nfrom os.path import join as joined\nfrom pathlib import Path\n"
        "from subprocess import getoutput\n\n\nclass Tool:\n    pass\n\n\n"
        "def tidy(change):\n    return change\n")
    before = confinement.current()
    try:
        confinement.confine(procs)
        for name, what in (("getoutput", "a function from subprocess"),
                           ("joined", "a function from posixpath"),
                           ("Path", "a class from pathlib"),
                           ("system", "a builtin from posix"),
                           ("Tool", "a class from rowtools")):
            with pytest.raises(TransformError) as refused:
                processors.load(f"rowtools:{name}")
            assert f"is not a function defined in rowtools (it is {what})" in \
                str(refused.value), name
        assert processors.load("rowtools:tidy").__name__ == "tidy"
    finally:
        confinement.confine(before)
        sys.modules.pop("rowtools", None)
