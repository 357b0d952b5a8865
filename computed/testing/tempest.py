"""OpenStack Tempest (PyPI ``tempest``, pinned) in a virtualenv of its own, pointed at computed-api.

Owns: Tempest's virtualenv (:func:`ensure`, cached by :mod:`computed.testing.venvs`), the
``tempest.conf`` the harness writes for a computed-api behind the harness's Keystone
(:func:`render_conf`: what computed serves and, as feature flags, what it does not), one bounded
``tempest run`` in a workspace (:func:`run`) and the reading of its subunit stream into per-test
results, a JUnit XML file and a summary (:func:`results`, :func:`write_junit`,
:func:`summary`).

Guarantees: a run never outlives its ``timeout`` (its whole process group is killed, and the
results streamed until then are kept); every file of a run stays in its workspace
(``tempest.conf``, ``results.subunit``, ``results.json``, ``results.xml``, ``tempest.log``).
Tempest imports what it likes (eventlet included) in its own interpreter; nothing of it is imported
into computed's processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from computed.testing import process, venvs

REQUIREMENTS = ("tempest==47.0.0",)
RESULTS = Path(__file__).parent / "bin" / "subunit_results.py"
#: On the PYTHONPATH of Tempest's processes: its sitecustomize works around Tempest's admin
#: classes wanting an image client when Glance is marked unavailable.
SITE = Path(__file__).parent / "tempest_site"
#: The resources docs/api.md claims (servers, flavors and their access lists, quotas and
#: quota classes, services, limits, versions), as Tempest's compute API test modules name
#: them.
CLAIMED_REGEX = (
    r"^tempest\.api\.compute\.(test_versions|test_quotas|flavors|limits"
    r"|servers\.test_(create_server|delete_server|list_server_filters|list_servers_negative"
    r"|servers|servers_negative|servers_microversions|server_actions|server_addresses"
    r"|server_addresses_negative|multiple_create|multiple_create_negative)"
    r"|admin\.test_(flavors|flavors_access|flavors_access_negative|flavors_extra_specs"
    r"|flavors_extra_specs_negative"
    r"|flavors_microversions|quotas|quotas_negative|services|services_negative|create_server"
    r"|delete_server|servers|servers_negative))\.")
ALL_REGEX = r"^tempest\.api\.compute"
#: The rest of ``tempest.api.compute`` (beside :data:`CLAIMED_REGEX`, the two make up all).
UNCLAIMED_REGEX = r"^tempest\.api\.compute\.(?!" + CLAIMED_REGEX.removeprefix(
    r"^tempest\.api\.compute\.") + ")"

#: ``[compute-feature-enabled]``: what computed does not serve (docs/api.md, "Not supported").
#: Each False makes Tempest skip the tests of that feature instead of failing them.
FEATURES_OFF = (
    "resize", "cold_migration", "live_migration", "live_migrate_back_and_forth",
    "block_migration_for_live_migration", "can_migrate_between_any_hosts",
    "volume_backed_live_migration", "vtpm_live_migration", "shelve", "shelve_migrate",
    "vnc_console", "spice_console", "serial_console", "console_output", "rescue",
    "stable_rescue", "suspend", "pause", "snapshot", "interface_attach", "change_password",
    "personality", "attach_encrypted_volume", "swap_volume", "volume_multiattach", "ide_bus",
    "unified_limits", "hostname_fqdn_sanitization",
    # Servers show MANUAL; Tempest's disk_config tests rebuild and resize with AUTO.
    "disk_config",
    # No metadata service and, until issue 24 item 11 lands, no config drive.
    "metadata_service", "config_drive",
)
#: ``[compute-feature-enabled] scheduler_enabled_filters``: computed's default pipeline
#: (docs/api.md, "Scheduling"); Tempest skips the server-group affinity tests without Nova's
#: ServerGroup*Filter.
SCHEDULER_FILTERS = "AvailabilityZoneFilter,ComputeCapabilitiesFilter,JsonFilter"


def ensure() -> Path:
    """Tempest's virtualenv (built once, then reused from the cache)."""
    return venvs.ensure("tempest", REQUIREMENTS)


@dataclass
class Target:
    """What Tempest is pointed at: the Keystone, its admin, and computed's flavors and image."""

    auth_url: str  # Keystone's v3 URL
    admin_user: str
    admin_password: str
    admin_project: str
    flavor_ref: str
    flavor_ref_alt: str
    image_ref: str
    image_ref_alt: str
    min_compute_nodes: int
    max_microversion: str = "2.61"
    region: str = "RegionOne"
    build_timeout: int = 300
    #: Glance in Keystone's catalog: ``image_ref``/``image_ref_alt`` are its images' ids.
    glance: bool = False


def render_conf(target: Target, workspace: Path) -> str:
    """tempest.conf for ``target``: dynamic credentials made by the Keystone admin, the compute
    endpoint from Keystone's catalog (``compute``), only Nova (computed) and Keystone available,
    and Glance where ``target.glance`` (its images found by the catalog's ``image``)."""
    sections: dict[str, dict[str, Any]] = {
        "DEFAULT": {"log_file": workspace / "tempest.log", "debug": True,
                    "use_stderr": False},
        "oslo_concurrency": {"lock_path": workspace / "locks"},
        "auth": {
            # Each test class gets a project and users of its own, made by the admin.
            "use_dynamic_credentials": True, "create_isolated_networks": False,
            "admin_username": target.admin_user, "admin_password": target.admin_password,
            "admin_project_name": target.admin_project, "admin_domain_name": "Default",
            "default_credentials_domain_name": "Default",
        },
        "identity": {"uri_v3": target.auth_url, "auth_version": "v3",
                     "region": target.region, "v3_endpoint_type": "public",
                     "disable_ssl_certificate_validation": True},
        "identity-feature-enabled": {"api_v2": False, "api_v3": True},
        "compute": {
            "catalog_type": "compute", "endpoint_type": "publicURL", "region": target.region,
            "flavor_ref": target.flavor_ref, "flavor_ref_alt": target.flavor_ref_alt,
            "image_ref": target.image_ref, "image_ref_alt": target.image_ref_alt,
            "min_compute_nodes": target.min_compute_nodes,
            "min_microversion": "2.1", "max_microversion": target.max_microversion,
            "build_timeout": target.build_timeout, "build_interval": 1,
            "hypervisor_type": "ironic",
        },
        "compute-feature-enabled": {**{name: False for name in FEATURES_OFF},
                                    "scheduler_enabled_filters": SCHEDULER_FILTERS,
                                    # computed makes no password and answers none (an
                                    # adminPass given is accepted): Nova's [api]
                                    # enable_instance_password = False.
                                    "enable_instance_password": False},
        # Without Glance, Tempest skips its image tests, and servers are built from an image
        # URL, which computed passes to Ironic as it is; with it, from Glance images.
        "service_available": {"nova": True, "glance": target.glance, "neutron": False,
                              "cinder": False, "swift": False, "heat": False,
                              "horizon": False, "placement": False},
        "validation": {"run_validation": False},
    }
    if target.glance:
        sections["image"] = {"catalog_type": "image", "region": target.region,
                             "endpoint_type": "publicURL"}
    lines: list[str] = []
    for section, options in sections.items():
        lines.append(f"[{section}]")
        for key, value in options.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            lines.append(f"{key} = {value}")
        lines.append("")
    return "\n".join(lines)


def init_workspace(venv: Path, workspace: Path) -> None:
    """What ``tempest init`` makes, without its registry of workspaces by name in ``~/.tempest``
    (a second run in a folder of the same name would be refused): ``etc/`` and a
    ``.stestr.conf`` pointing at Tempest's tests."""
    package = next(venv.glob("lib/python*/site-packages/tempest"))
    (workspace / "etc").mkdir(parents=True, exist_ok=True)
    (workspace / ".stestr.conf").write_text(
        f"[DEFAULT]\ntest_path={package / 'test_discover'}\ntop_dir={package}\n"
        "group_regex=([^\\.]*\\.)*\n")


def run(venv: Path, workspace: Path, regex: str, concurrency: int, timeout: float,
        env: Mapping[str, str] | None = None) -> int | None:
    """``tempest run`` in ``workspace`` with its ``etc/tempest.conf``; the subunit stream goes to
    ``results.subunit`` as it is produced. Returns the exit status, None if ``timeout`` ended it."""
    argv = [str(venv / "bin" / "tempest"), "run", "--config-file",
            str(workspace / "etc" / "tempest.conf"), "--regex", regex,
            "--concurrency", str(concurrency), "--subunit"]
    # TEMPEST_CONFIG_DIR too: Tempest's workers find their configuration by it, never by a
    # /etc/tempest or ~/.tempest left on the machine.
    env = {**(env if env is not None else os.environ), "PYTHONPATH": str(SITE),
           "TEMPEST_CONFIG_DIR": str(workspace / "etc"), "TEMPEST_CONFIG": "tempest.conf"}
    with open(workspace / "results.subunit", "wb") as out, \
            open(workspace / "tempest-run.log", "ab") as err:
        proc = subprocess.Popen(argv, cwd=workspace, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, env=env,
                                start_new_session=True)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end(proc)
            return None
        except BaseException:  # Ctrl-C, SIGTERM: Tempest goes too, then the caller unwinds
            _end(proc)
            raise


def _end(proc: subprocess.Popen) -> None:
    """End ``proc``'s process group (stestr's workers are in it); what was streamed stays."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=30)
            return
        except subprocess.TimeoutExpired:
            continue


def results(venv: Path, workspace: Path) -> list[dict[str, Any]]:
    """Per-test results from ``results.subunit`` (read by Tempest's own python-subunit): each
    ``{"id", "status", "reason", "seconds"}``; ``results.json`` holds the same."""
    out = workspace / "results.json"
    process.run([str(venv / "bin" / "python"), str(RESULTS), str(workspace / "results.subunit"),
                 str(out)], "reading Tempest's subunit stream", timeout=300)
    return json.loads(out.read_text())


def write_junit(tests: list[dict[str, Any]], path: Path) -> None:
    """A JUnit XML file of ``tests`` (CI systems read it)."""
    counts = Counter(t["status"] for t in tests)
    # A test the run never reached (ended by its timeout) is skipped there, saying so.
    suite = ET.Element("testsuite", name="tempest", tests=str(len(tests)),
                       failures=str(counts["fail"]),
                       skipped=str(counts["skip"] + counts["exists"]), errors="0")
    for test in tests:
        classname, _, name = test["id"].partition("[")[0].rpartition(".")
        case = ET.SubElement(suite, "testcase", classname=classname, name=name,
                             time=f"{test.get('seconds') or 0:.3f}")
        if test["status"] == "fail":
            ET.SubElement(case, "failure").text = test.get("reason") or ""
        elif test["status"] == "skip":
            ET.SubElement(case, "skipped", message=(test.get("reason") or "")[:500])
        elif test["status"] == "exists":
            ET.SubElement(case, "skipped", message="not run: the run ended by its timeout")
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def summary(tests: list[dict[str, Any]]) -> str:
    """``P passed, F failed, S skipped`` (a class whose setup failed counts as one failure),
    and how many listed tests were not run (the run ended by its timeout)."""
    counts = Counter(t["status"] for t in tests)
    text = f"{counts['success']} passed, {counts['fail']} failed, {counts['skip']} skipped"
    other = {status: n for status, n in counts.items()
             if status not in ("success", "fail", "skip")}
    if counts["exists"]:
        text += f", {counts['exists']} not run"
    rest = {k: v for k, v in other.items() if k != "exists"}
    return text + "".join(f", {n} {status}" for status, n in sorted(rest.items()))


def wait_ready(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``check`` for ``timeout`` seconds (a RuntimeError naming ``what`` after)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not after {timeout:.0f} s")
        time.sleep(0.5)
