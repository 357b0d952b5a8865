"""The policy enforcer shared by the API's request threads (issue 22 item 1): every check, and
the reload of a changed policy file oslo.policy starts from inside it, is one critical section,
so no request thread sees a rule set half rebuilt (the file's rules in, the defaults not yet)."""

from __future__ import annotations

import threading

from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from computed.api import policy


def test_no_other_thread_can_check_while_one_check_or_reload_runs(monkeypatch):
    conf = cfg.ConfigOpts()
    conf([])  # oslo.policy registers its own options; no policy file: the in-code defaults
    enforcer = policy.enforcer(conf)
    other_thread_got_in = []
    real_enforce = oslo_policy.Enforcer.enforce

    def enforce(self, *args, **kwargs):
        # Where oslo.policy loads (or reloads) its rules and looks the rule up: another
        # request thread must not get in now.
        attempt = threading.Thread(
            target=lambda: other_thread_got_in.append(self._checking.acquire(blocking=False)))
        attempt.start()
        attempt.join()
        return real_enforce(self, *args, **kwargs)

    monkeypatch.setattr(oslo_policy.Enforcer, 'enforce', enforce)
    creds = {'roles': ['admin'], 'project_id': 'p1', 'user_id': 'u1'}
    assert enforcer.enforce('context_is_admin', {}, creds)
    assert other_thread_got_in == [False]
