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
