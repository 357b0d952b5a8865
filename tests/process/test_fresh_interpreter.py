"""What only a fresh interpreter shows: the hash ring's answer under another PYTHONHASHSEED
(every daemon must compute the same owners), and what a module pulls in when it is the first
thing imported. (What the console scripts import: tests/process/test_scripts.py.)"""

import json
import os
import subprocess
import sys

import hashring
from hashring import HashRing, bounded_assign

ROOT = os.path.dirname(os.path.dirname(hashring.__file__))


def python(code: str, **env: str) -> str:
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), cwd=ROOT,
                          check=True, capture_output=True, text=True, timeout=120).stdout


def test_the_ring_gives_the_same_answer_in_another_process():
    keys = [f"node-{i}" for i in range(300)]
    here = HashRing([f"compute-{i}" for i in range(7)]).assign(keys)
    code = ("import json, hashring;"
            "r = hashring.HashRing([f'compute-{i}' for i in range(7)]);"
            "print(json.dumps(r.assign([f'node-{i}' for i in range(300)])))")
    assert here == json.loads(python(code, PYTHONHASHSEED="12345"))


def test_bounded_loads_give_the_same_answer_in_another_process():
    keys = [f"node-{i}" for i in range(300)]
    ring = HashRing([f"compute-{i}" for i in range(7)])
    here = bounded_assign(ring, keys, 1.02)
    code = ("import json, hashring;"
            "r = hashring.HashRing([f'compute-{i}' for i in range(7)]);"
            "k = [f'node-{i}' for i in range(300)];"
            "print(json.dumps(hashring.bounded_assign(r, k[::-1], 1.02)))")
    assert here == json.loads(python(code, PYTHONHASHSEED="4242"))


def test_the_queries_do_not_load_the_migrations_tooling():
    # The daemon and the reporter use the query modules only; alembic costs each of them ~12 MB of
    # RSS (issue 13 item 10), so it is imported when a migration command runs, not before.
    out = python("import sys, computed.db.common, computed.db.providers, computed.db.instances, "
                 "computed.db.flavors, computed.db.quotas, computed.db.key_pairs; "
                 "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))")
    assert out.strip() == "[]"


DAEMON_CONF = """[DEFAULT]
transport_url = rabbit://computed:secret@127.0.0.1:5672/
[coordination]
backend_url = zookeeper://127.0.0.1:2181
[placement]
auth_type = none
endpoint_override = http://127.0.0.1:8778
[database]
connection = sqlite:////tmp/computed.sqlite
"""

OTHER_PROGRAMS = ("keystonemiddleware", "oslo_middleware", "cryptography", "bcrypt")


def loaded_after_the_config(conf: str) -> list[str]:
    """What of :data:`OTHER_PROGRAMS` a daemon's configuration load (of ``conf``) imported."""
    code = ("import sys; from computed.conf import loader; "
            f"loader.load(['--config-file', {conf!r}], 'computed'); "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(OTHER_PROGRAMS)!r}))")
    return json.loads(python(code).replace("'", '"'))


def test_a_daemon_configuration_loads_no_other_program_option_list(tmp_path):
    # The unknown-option check reads the API's and middlewares' option lists only when the file
    # has a section the daemon's own options do not know: keystonemiddleware and oslo.middleware
    # (cryptography's and bcrypt's extensions with them) are 14 MB of a daemon's RSS.
    conf = tmp_path / "computed.conf"
    conf.write_text(DAEMON_CONF)
    assert loaded_after_the_config(str(conf)) == []
    conf.write_text(DAEMON_CONF + "[oslo_middleware]\nenable_proxy_headers_parsing = true\n")
    assert "oslo_middleware" in loaded_after_the_config(str(conf))
