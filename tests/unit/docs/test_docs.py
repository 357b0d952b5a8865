"""The docs cannot lie: every command and snippet in README.md and docs/ is exercised.

computed.conf fragments (```ini) go through ``computed-manage config check`` on top of the
README's minimal configuration; commands (```sh, ```console and inline ``computed-manage ...``,
``tools/...``) through the real program's ``--help`` (every option the doc writes must be in it)
or a cheap real run: computed's console scripts in-process (tests/cli.py), other programs (the
OpenStack client, tools/, ``python -m``) as processes in tests/process/test_docs.py (the commands
:func:`spawns` names); other programs' files are checked against what computed expects of them;
openstacksdk snippets (```python) build their connections for real and call only methods the SDK
has.
A snippet of a kind this test does not know fails: add a check with it.
"""

from __future__ import annotations

import ast
import configparser
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import cli
from tests.unit.docs.snippets import PAGES, ROOT, Block, blocks, commands, inline_commands

BIN = Path(sys.executable).parent
CONSOLE_SCRIPTS = ("computed", "computed-reporter", "computed-manage", "computed-api",
                   "computed-status")
# Commands of the operating system the deployment guide (and README's walkthrough of the local
# run: printf, curl) uses; their arguments that are paths in this repository must exist.
SYSTEM = ("useradd", "install", "systemctl", "systemd-analyze", "promtool", "apt-get", "printf",
          "curl")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_.]*$")

ALL = [b for page in PAGES for b in blocks(page) + inline_commands(page)]
SHELL = [b for b in ALL if b.language in ("sh", "console")]
COMPUTED_CONF = [b for b in ALL if b.info == "ini"]


def ids(items: list[Block]) -> list[str]:
    return [b.where for b in items]


def run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          stdin=subprocess.DEVNULL)


@functools.cache
def help_text(*argv: str) -> str:
    """``argv --help``, which must succeed."""
    result = run([*argv, "--help"])
    assert result.returncode == 0, f"{' '.join(argv)} --help: {result.stderr.strip()}"
    return result.stdout


@functools.cache
def script_help(script: str, *path: str) -> str:
    """``script [path...] --help`` of one of computed's console scripts, run in-process as a
    user with no home directory would (no configuration file is read)."""
    result = cli.run(script, *path, "--help", home="/nonexistent", cwd=ROOT)
    assert result.returncode == 0, f"{script} {' '.join(path)} --help: {result.stderr.strip()}"
    return result.stdout


def assert_options_in(words: list[str], text: str, what: str) -> None:
    for word in words:
        if word.startswith("--"):
            option = word.split("=")[0]
            assert option in text, f"{what} has no option {option}"


# --- commands ------------------------------------------------------------------------------

def check_console_script(words: list[str]) -> None:
    script, rest = words[0], words[1:]
    # --config-file/--config-dir are accepted anywhere (computed.conf.loader).
    kept, skip = [], False
    for word in rest:
        if skip:
            skip = False
        elif word in ("--config-file", "--config-dir"):
            skip = True
        else:
            kept.append(word)
    path = []
    for word in kept:
        if word.startswith("-") or not re.match(r"^[a-z][a-z_-]*$", word):
            break
        path.append(word)
    text = script_help(script, *path)
    assert_options_in(kept, text, f"{script} {' '.join(path)}")


def check_tools(words: list[str]) -> None:
    tool = words[0]
    assert (ROOT / tool).exists(), f"{tool} does not exist"
    name = tool.removeprefix("tools/").rstrip("/")
    if name in ("", "bootstrap", "run-tests"):
        # run-tests passes its arguments to pytest: paths must exist.
        for word in words[1:]:
            if not word.startswith("-"):
                assert (ROOT / word).exists(), f"{' '.join(words)}: no {word}"
        return
    if name == "run-local":  # it runs python -m tools.demo with its arguments
        assert "-m tools.demo" in (ROOT / tool).read_text()
        assert_options_in(words[1:], help_text(sys.executable, "-m", "tools.demo"), tool)
        return
    if name == "run-tempest":
        assert_options_in(words[1:], help_text(sys.executable, str(ROOT / tool)), tool)
        return
    if name == "run-upgrade-test":  # it runs python -m tests.upgrade.grenade with its arguments
        assert "-m tests.upgrade.grenade" in (ROOT / tool).read_text()
        assert_options_in(words[1:], help_text(sys.executable, "-m", "tests.upgrade.grenade"),
                          tool)
        return
    if name == "services":
        text = help_text(sys.executable, str(ROOT / tool))
        actions = re.search(r"\{([a-z,]+)\}", text).group(1).split(",")
        assert words[1] in actions, f"tools/services has no action {words[1]}"
        assert_options_in(words[1:], text, tool)
        return
    raise AssertionError(f"{tool}: no check for this tool yet")


def check_python(words: list[str]) -> None:
    if words[1] == "-m":
        module = words[2]
        if module == "pytest":
            for word in words[3:]:
                assert (ROOT / word).exists(), f"no {word}"
            return
        package = module.split(".")[0]
        assert (ROOT / package / "__init__.py").exists(), f"no package {package}"
        if not PLACEHOLDER.match(module.split(".")[-1]):
            help_text(sys.executable, "-m", module)
        return
    check_tools(words[1:])


def check_system(words: list[str]) -> None:
    for word in words[1:]:
        if re.match(r"^(etc|tools|devstack|computed)/", word):
            assert (ROOT / word).exists(), f"{' '.join(words)}: no {word} in the repository"
    if words[0] == "systemctl" and len(words) > 2:
        unit = words[-1]
        assert (ROOT / "etc" / "systemd" / f"{unit}.service").exists(), \
            f"{' '.join(words)}: no unit {unit} in etc/systemd/"


def check_variable(assignment: str) -> None:
    """``VAR=value``: something in computed, its tests or tools uses VAR."""
    assert "=" in assignment, f"{assignment}: not VAR=value"
    variable = assignment.split("=")[0]
    assert any(variable.encode() in path.read_bytes()  # what grep -r would find
               for top in ("computed", "tests", "tools") for folder, _, files in os.walk(ROOT / top)
               for path in (Path(folder, name) for name in files)), f"nothing reads {variable}"


def check_openstack(words: list[str]) -> None:
    """python-openstackclient (installed with computed's test requirements): the command and its
    options exist."""
    path = []
    for word in words[1:]:
        if word.startswith("-"):
            break
        path.append(word)
    assert_options_in(words, help_text(str(BIN / "openstack"), *path), " ".join(words[:3]))


def spawns(words: list[str]) -> bool:
    """Whether checking ``words`` runs another program than computed's console scripts: those
    commands are checked by tests/process/test_docs.py (the unit tier starts no process)."""
    words = list(words)
    while "=" in words[0] and not words[0].startswith("-"):
        words.pop(0)
    if words[0] in ("openstack", "oslo-config-generator"):
        return True
    if words[0] == ".venv/bin/python":
        if words[1] == "-m":
            module = words[2]
            return module != "pytest" and not PLACEHOLDER.match(module.split(".")[-1])
        words = words[1:]
    if words[0].startswith("tools"):
        return words[0].removeprefix("tools/").rstrip("/") in ("run-local", "services",
                                                                 "run-tempest",
                                                                 "run-upgrade-test")
    return False


def check_command(words: list[str]) -> None:
    while "=" in words[0] and not words[0].startswith("-"):  # VAR=value prefixes
        check_variable(words.pop(0))
    first = words[0]
    if first == "export":
        for assignment in words[1:]:
            check_variable(assignment)
    elif first == "openstack":
        check_openstack(words)
    elif first in CONSOLE_SCRIPTS:
        check_console_script(words)
    elif first.startswith(".venv/bin/"):
        name = first.removeprefix(".venv/bin/")
        if name == "python":
            check_python(words)
        else:
            check_console_script([name, *words[1:]])
    elif first.startswith("tools"):
        check_tools(words)
    elif first == "pip":
        # computed has no release (docs/upgrades.md): it installs from a checkout only.
        targets = [w.split("[")[0] for w in words[2:] if not w.startswith("-")]
        assert targets and all((t == "." or t.startswith(("./", "/"))) and (ROOT / t).exists()
                               for t in targets), \
            f"{' '.join(words)}: install from a checkout (pip install .); there is no release"
    elif first == "tox":
        env = words[words.index("-e") + 1]
        assert f"[testenv:{env}]" in (ROOT / "tox.ini").read_text() or env == "py3", \
            f"tox.ini has no environment {env}"
    elif first == "oslo-config-generator":
        result = run([str(BIN / first), *words[1:], "--output-file", "/dev/null"])
        assert result.returncode == 0, result.stderr
    elif first in SYSTEM:
        check_system(words)
    else:
        raise AssertionError(f"{first}: a command this test does not know; add a check")


@pytest.mark.parametrize("block", SHELL, ids=ids(SHELL))
def test_every_command_works(block):
    found = commands(block)
    assert found, f"{block.where}: no command in a shell block"
    for words in found:
        if spawns(list(words)):
            continue
        try:
            check_command(list(words))
        except AssertionError as exc:
            raise AssertionError(f"{block.where}: {' '.join(words)}: {exc}") from None


# --- computed.conf ---------------------------------------------------------------------------

def minimal_conf() -> Block:
    return next(b for b in blocks(ROOT / "README.md") if b.info == "ini")


def config_check(*files: Path) -> cli.Result:
    argv = []
    for path in files:
        argv += ["--config-file", str(path)]
    return cli.run("computed-manage", *argv, "config", "check", home=files[0].parent, cwd=ROOT)


def test_the_readme_minimal_configuration_passes_config_check(tmp_path):
    path = tmp_path / "computed.conf"
    path.write_text(minimal_conf().text)
    result = config_check(path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("block", COMPUTED_CONF, ids=ids(COMPUTED_CONF))
def test_every_computed_conf_snippet_passes_config_check(block, tmp_path):
    base, fragment = tmp_path / "base.conf", tmp_path / "fragment.conf"
    base.write_text(minimal_conf().text)
    fragment.write_text(block.text)
    result = config_check(base, fragment)
    assert result.returncode == 0, f"{block.where}: {(result.stdout + result.stderr).strip()}"


# --- other programs' files -------------------------------------------------------------------

def other(name: str) -> list[Block]:
    return [b for b in ALL if b.info == f"ini {name}"]


def session_timeouts() -> list[int]:
    """Every ``?timeout=`` the computed.conf snippets use, in seconds."""
    return [int(t) for b in COMPUTED_CONF for t in re.findall(r"\?timeout=(\d+)", b.text)]


@pytest.mark.parametrize("block", other("zoo.cfg"), ids=ids(other("zoo.cfg")))
def test_zoo_cfg_admits_the_documented_session_timeout(block):
    settings = {}
    for line in block.text.splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings[key.strip()] = value.strip()
    tick = int(settings["tickTime"])
    ceiling = int(settings.get("maxSessionTimeout", 20 * tick))
    assert session_timeouts()
    for timeout in session_timeouts():
        assert 2 * tick <= timeout * 1000 <= ceiling, f"timeout={timeout} outside zoo.cfg's bounds"


@pytest.mark.parametrize("block", other("ironic.conf"), ids=ids(other("ironic.conf")))
def test_ironic_conf_sends_the_notifications_computed_listens_to(block):
    from computed.conf import ironic
    parser = configparser.ConfigParser()
    parser.read_string(block.text)
    topic = next(o.default for o in ironic.OPTS if o.name == "notification_topic")
    assert topic in parser["DEFAULT"]["versioned_notifications_topics"].split(",")
    assert parser["oslo_messaging_notifications"]["driver"] == "messagingv2"
    assert parser["DEFAULT"]["notification_level"] in ("debug", "info")


@pytest.mark.parametrize("block", other("systemd"), ids=ids(other("systemd")))
def test_systemd_override_resets_and_runs_a_console_script(block):
    lines = [line for line in block.text.splitlines() if line.strip()]
    assert lines[0] == "[Service]" and lines[1] == "ExecStart="
    command = lines[2].removeprefix("ExecStart=").split()
    unit = (ROOT / "etc/systemd/computed.service").read_text()
    shipped = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1).split()
    assert Path(command[0]).name == Path(shipped[0]).name
    assert command[1:] == shipped[1:]
    check_console_script([Path(command[0]).name, *command[1:]])


@pytest.mark.parametrize("block", other("local.conf"), ids=ids(other("local.conf")))
def test_devstack_local_conf_enables_what_the_plugin_knows(block):
    plugin = (ROOT / "devstack/plugin.sh").read_text()
    assert "enable_plugin computed " in block.text
    for line in block.text.splitlines():
        if line.startswith("enable_service"):
            for service in line.split()[1:]:
                assert re.search(rf"\b{re.escape(service)}\b", plugin), service


PYTHON = [b for b in ALL if b.info == "python"]


@pytest.mark.parametrize("block", PYTHON, ids=ids(PYTHON))
def test_openstacksdk_snippets_connect_as_noauth2_and_call_what_the_sdk_has(block):
    """Each ``openstack.connection.Connection(...)`` is built as written (no request is made)
    and points at a compute API endpoint; each ``NAME.compute.METHOD`` is a method of the SDK's
    compute proxy."""
    import openstack
    from openstack.compute.v2 import _proxy
    tree = ast.parse(block.text)
    built = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if ast.unparse(node.func) == "openstack.connection.Connection":
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            conn = openstack.connection.Connection(**kwargs)
            assert conn.config.get_auth_args()["endpoint"].endswith("/v2.1"), block.where
            built += 1
        elif isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "compute":
            assert callable(getattr(_proxy.Proxy, node.func.attr, None)), \
                f"{block.where}: openstacksdk's compute has no {node.func.attr}"
    assert built, f"{block.where}: no openstack.connection.Connection(...)"


def test_every_snippet_is_of_a_kind_this_test_checks():
    known = {"sh", "console", "ini", "ini zoo.cfg", "ini ironic.conf", "ini systemd",
             "ini local.conf", "json fleet-status", "yaml prometheus.yml", "sh inline", "python"}
    unknown = [f"{b.where} ({b.info})" for b in ALL if b.info not in known]
    assert not unknown, f"snippets no test checks: {unknown}"


# --- documents -------------------------------------------------------------------------------

def shape(value):
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__ if value is not None else "null"


@pytest.mark.parametrize("block", [b for b in ALL if b.info == "json fleet-status"],
                         ids=ids([b for b in ALL if b.info == "json fleet-status"]))
def test_fleet_status_example_has_the_real_document_shape(block):
    from computed.fleet.claims import ClaimRecord
    from computed.fleet.membership import MemberInfo
    from computed.fleet.status import snapshot
    real = snapshot("computed", [MemberInfo("c1", 1, False, 7)],
                    {"n1": ClaimRecord("n1", "c1", 123, 7)}, ["n1"])
    documented = json.loads(block.text)
    assert shape(documented) == shape(real)


@pytest.mark.parametrize("block", [b for b in ALL if b.info == "yaml prometheus.yml"],
                         ids=ids([b for b in ALL if b.info == "yaml prometheus.yml"]))
def test_prometheus_config_matches_the_shipped_rules(block):
    config = yaml.safe_load(block.text)
    for rule_file in config["rule_files"]:
        assert (ROOT / "etc/prometheus" / Path(rule_file).name).exists(), rule_file
    rules = (ROOT / "etc/prometheus/computed-alerts.yml").read_text()
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    assert jobs == set(re.findall(r'job="([a-z-]+)"', rules))
