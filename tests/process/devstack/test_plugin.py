"""The devstack plugin: shellcheck-clean, and its phases run in bash against stubbed devstack
functions (tests/process/devstack/stubs.sh), checking the configuration and processes they set up.

shellcheck comes from Debian; when it is missing and this runs as root (tools/run-tests, CI), the
test installs it the way tools/bootstrap installs ZooKeeper. It is a single static binary with no
services, so installing it cannot disturb the machine; elsewhere the test fails with the command
to run rather than passing without the check.
"""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from oslo_config import cfg

from computed import conf as computed_conf

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = ROOT / "devstack"
STUBS = Path(__file__).with_name("stubs.sh")
SHELL_FILES = ("devstack/plugin.sh", "devstack/settings", "devstack/lib/computed")
PHASES = (("stack", "install"), ("stack", "post-config"), ("stack", "extra"), ("unstack",),
          ("clean",))
CONTROLLER = ("computed computed-reporter computed-zookeeper computed-api keystone mysql rabbit "
              "ir-api ir-cond")
SUBNODE = "computed"

ENV = {
    "SERVICE_HOST": "10.0.0.1",
    "RABBIT_USERID": "stackrabbit", "RABBIT_PASSWORD": "rabbitpw", "RABBIT_HOST": "10.0.0.1",
    "DATABASE_TYPE": "mysql", "DATABASE_USER": "root", "DATABASE_PASSWORD": "dbpw",
    "DATABASE_HOST": "10.0.0.1",
    "KEYSTONE_SERVICE_URI": "http://10.0.0.1/identity", "SERVICE_PASSWORD": "servicepw",
    "SERVICE_PROJECT_NAME": "service", "SERVICE_DOMAIN_NAME": "Default",
    "REGION_NAME": "RegionOne", "ENABLE_DEBUG_LOG_LEVEL": "True", "STACK_USER": "stack",
    "IRONIC_CONF_FILE": "/etc/ironic/ironic.conf", "SERVICE_PROTOCOL": "http",
}


def shellcheck() -> str:
    tool = shutil.which("shellcheck")
    if tool is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "shellcheck"], check=True,
                       capture_output=True, env={**os.environ,
                                                 "DEBIAN_FRONTEND": "noninteractive"})
        tool = shutil.which("shellcheck")
    if tool is None:
        pytest.fail("shellcheck is missing: apt-get install shellcheck")
    return tool


def test_shellcheck():
    result = subprocess.run([shellcheck(), "-x", "-s", "bash", *SHELL_FILES], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


class Run:
    """One host's run of every phase: the recorded calls, per phase."""

    def __init__(self, tmp_path: Path, enabled: str):
        self.conf_file = tmp_path / "etc" / "computed.conf"
        self.data_dir = tmp_path / "data" / "computed"
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        manage = self.bin / "computed-manage"
        manage.write_text('#!/bin/bash\nprintf "%q " computed-manage "$@" >> "$STUB_LOG"\n'
                          'echo >> "$STUB_LOG"\n')
        manage.chmod(0o755)
        self.calls: dict[tuple[str, ...], list[list[str]]] = {}
        for phase in PHASES:
            log = tmp_path / ("-".join(phase) + ".log")
            log.touch()
            script = "\n".join([
                f"source {shlex.quote(str(STUBS))}",
                *(f"{key}={shlex.quote(value)}" for key, value in ENV.items()),
                f"DEST={shlex.quote(str(tmp_path / 'opt'))}",
                f"DATA_DIR={shlex.quote(str(tmp_path / 'data'))}",
                f"COMPUTED_DIR={shlex.quote(str(ROOT))}",
                f"COMPUTED_CONF_DIR={shlex.quote(str(self.conf_file.parent))}",
                f"COMPUTED_CONF_FILE={shlex.quote(str(self.conf_file))}",
                f"source {shlex.quote(str(PLUGIN / 'settings'))}",
                f"source {shlex.quote(str(PLUGIN / 'plugin.sh'))} {' '.join(phase)}",
            ])
            result = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                                    timeout=60, env={"PATH": os.environ["PATH"],
                                                     "STUB_LOG": str(log),
                                                     "STUB_BIN": str(self.bin),
                                                     "STUB_ENABLED": enabled})
            assert result.returncode == 0, (phase, result.stdout, result.stderr)
            self.calls[phase] = [shlex.split(line) for line in log.read_text().splitlines()
                                 if line.strip()]

    def named(self, phase: tuple[str, ...], name: str) -> list[list[str]]:
        return [call[1:] for call in self.calls[phase] if call[0] == name]

    def config(self, path: Path | None = None) -> configparser.ConfigParser:
        """The file the iniset calls of every phase write (devstack's iniset, replayed)."""
        # [DEFAULT] as a plain section: configparser would otherwise mix it into every other.
        parser = configparser.ConfigParser(interpolation=None, default_section="\0")
        parser.optionxform = str
        for phase in PHASES:
            for file, section, key, value in self.named(phase, "iniset"):
                if Path(file) != (path or self.conf_file):
                    continue
                if not parser.has_section(section):
                    parser.add_section(section)
                parser.set(section, key, value)
        return parser


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    return Run(tmp_path_factory.mktemp("controller"), CONTROLLER)


@pytest.fixture(scope="module")
def subnode(tmp_path_factory):
    return Run(tmp_path_factory.mktemp("subnode"), SUBNODE)


def test_settings_declare_the_plugin(controller):
    assert controller.named(("stack", "install"), "define_plugin") == [["computed"]]
    assert controller.named(("stack", "install"), "plugin_requires") == [["computed", "ironic"]]


def test_install_uses_pip_and_zookeeper_from_the_distribution(controller, subnode):
    assert controller.named(("stack", "install"), "setup_develop") == [[str(ROOT)]]
    packages = controller.named(("stack", "install"), "install_package")
    assert packages and "zookeeper" in packages[0]
    assert subnode.named(("stack", "install"), "install_package") == []


def test_config_points_at_devstacks_services(controller):
    conf = controller.config()
    assert conf["DEFAULT"]["transport_url"] == "rabbit://stackrabbit:rabbitpw@10.0.0.1:5672/"
    assert conf["coordination"]["backend_url"] == "zookeeper://10.0.0.1:2181?timeout=10"
    assert conf["database"]["connection"] == \
        "mysql+pymysql://root:dbpw@10.0.0.1/computed?charset=utf8"
    for section in ("ironic", "placement"):
        assert dict(conf[section]) == {
            "auth_type": "password", "auth_url": "http://10.0.0.1/identity",
            "username": "computed", "password": "servicepw", "project_name": "service",
            "user_domain_name": "Default", "project_domain_name": "Default",
            "region_name": "RegionOne"}, section
    assert dict(conf["metrics"]) == {"bind_host": "127.0.0.1", "port": "9621",
                                     "reporter_port": "9622"}


def test_config_is_valid_for_computed(controller, tmp_path):
    path = tmp_path / "computed.conf"
    with open(path, "w") as out:
        controller.config().write(out)
    conf = cfg.ConfigOpts()
    computed_conf.register_opts(conf)
    conf(["--config-file", str(path)], project="computed", default_config_files=[])
    assert conf.metrics.port == 9621 and conf.metrics.reporter_port == 9622
    assert conf.coordination.backend_url.startswith("zookeeper://")
    assert conf.fleet.audit_log == str(controller.data_dir / "audit.jsonl")
    assert conf.ironic.auth_type == "password" and conf.placement.auth_type == "password"


def test_ironic_sends_versioned_notifications(controller, subnode):
    ironic = controller.config(Path(ENV["IRONIC_CONF_FILE"]))
    assert ironic["DEFAULT"]["notification_level"] == "info"
    assert ironic["DEFAULT"]["versioned_notifications_topics"] == \
        "ironic_versioned_notifications"
    assert ironic["oslo_messaging_notifications"]["driver"] == "messagingv2"
    assert not subnode.config(Path(ENV["IRONIC_CONF_FILE"])).sections()


def test_controller_creates_user_and_database_and_syncs(controller):
    post = ("stack", "post-config")
    assert controller.named(post, "create_service_user") == [["computed", "admin"]]
    assert controller.named(post, "get_or_add_user_project_role") == [
        ["service", "computed", "service"]]
    assert controller.named(post, "recreate_database") == [["computed"]]
    assert controller.named(post, "computed-manage") == [
        ["--config-file", str(controller.conf_file), "db", "sync"]]
    zoo = (controller.data_dir / "zoo.cfg").read_text()
    assert "clientPort=2181" in zoo and f"dataDir={controller.data_dir}/zookeeper" in zoo


def test_controller_runs_zookeeper_then_reporter_then_daemon_then_api(controller):
    started = controller.named(("stack", "extra"), "run_process")
    assert [name for name, _command in started] == \
        ["computed-zookeeper", "computed-reporter", "computed", "computed-api"]
    commands = dict(started)
    assert "org.apache.zookeeper.server.quorum.QuorumPeerMain" in commands["computed-zookeeper"]
    assert commands["computed-reporter"] == \
        f"{controller.bin}/computed-reporter --config-file {controller.conf_file}"
    assert commands["computed"] == f"{controller.bin}/computed --config-file {controller.conf_file}"
    waits = " ".join(" ".join(c) for c in controller.named(("stack", "extra"), "timeout"))
    assert "ruok" in waits
    assert "http://127.0.0.1:9622/healthz" in waits and "http://127.0.0.1:9621/healthz" in waits
    assert commands["computed-api"] == \
        f"{controller.bin}/computed-api --config-file {controller.conf_file}"
    assert "http://127.0.0.1:8774/healthcheck" in waits


def test_api_is_the_catalogs_compute_service_behind_keystone(controller, tmp_path):
    conf = controller.config()
    assert dict(conf["api"]) == {"bind_port": "8774", "auth_strategy": "keystone"}
    post = ("stack", "post-config")
    # devstack's helper writes [keystone_authtoken] for the service user.
    assert controller.named(post, "configure_keystone_authtoken_middleware") == [
        [str(controller.conf_file), "computed"]]
    assert controller.named(post, "get_or_create_service") == [
        ["computed-api", "compute", "Compute Service (computed)"]]
    assert controller.named(post, "get_or_create_endpoint") == [
        ["compute", "RegionOne", "http://10.0.0.1:8774/v2.1"]]
    path = tmp_path / "computed.conf"
    with open(path, "w") as out:
        conf.write(out)
    parsed = cfg.ConfigOpts()
    computed_conf.register_opts(parsed)
    parsed(["--config-file", str(path)], project="computed", default_config_files=[])
    assert parsed.api.auth_strategy == "keystone" and parsed.api.bind_port == 8774


def test_subnode_runs_only_the_daemon_against_the_controller(subnode):
    assert [c[0] for c in subnode.named(("stack", "extra"), "run_process")] == ["computed"]
    assert subnode.named(("stack", "post-config"), "create_service_user") == []
    assert subnode.named(("stack", "post-config"), "recreate_database") == []
    assert subnode.named(("stack", "post-config"), "computed-manage") == []
    assert subnode.named(("stack", "post-config"), "get_or_create_endpoint") == []
    assert "api" not in subnode.config()
    assert subnode.config()["coordination"]["backend_url"].startswith("zookeeper://10.0.0.1:")
    assert not (subnode.data_dir / "zoo.cfg").exists()


def test_unstack_stops_the_api_then_the_daemon_and_clean_removes_files(controller):
    assert controller.named(("unstack",), "stop_process") == [
        ["computed-api"], ["computed"], ["computed-reporter"], ["computed-zookeeper"]]
    assert controller.named(("clean",), "sudo") == [
        ["rm", "-rf", str(controller.conf_file.parent), str(controller.data_dir)]]


def test_nothing_happens_when_no_service_is_enabled(tmp_path):
    run = Run(tmp_path, "keystone")
    for phase in PHASES:
        assert {c[0] for c in run.calls[phase]} <= {"define_plugin", "plugin_requires"}, phase


def test_zuul_multinode_job_uses_the_plugin():
    import yaml
    config = yaml.safe_load((ROOT / ".zuul.yaml").read_text())
    job = next(item["job"] for item in config if "job" in item)
    assert job["parent"] == "devstack-multinode"  # two nodes: controller and subnode
    assert "computed" in job["vars"]["devstack_plugins"]
    assert list(job["vars"]["devstack_plugins"]) == ["ironic", "computed"]  # ironic first
    controller = job["vars"]["devstack_services"]
    assert all(controller[s] for s in ("computed", "computed-reporter", "computed-zookeeper",
                                        "ir-api", "ir-cond", "placement-api"))
    subnode = job["group-vars"]["subnode"]["devstack_services"]
    assert subnode["computed"] and not subnode["computed-reporter"]
    assert not subnode["computed-zookeeper"]
    assert (ROOT / job["post-run"]).exists()
    yaml.safe_load((ROOT / job["post-run"]).read_text())
    project = next(item["project"] for item in config if "project" in item)
    assert job["name"] in project["check"]["jobs"]
