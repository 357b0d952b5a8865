"""The Keystone of the harness: real tokens for an admin and a member of each of two projects."""

from __future__ import annotations

import pytest
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from computed.testing.keystone import ADMIN, MEMBER_A, MEMBER_B


def test_each_person_gets_a_real_token_for_their_project_and_role(keystone_service):
    admin = ks_session.Session(auth=keystone_service.auth(ADMIN))
    seen = {}
    for who in (ADMIN, MEMBER_A, MEMBER_B):
        token = keystone_service.token(who)
        # Keystone itself validates it: whose, which project, which roles.
        body = admin.get(f"{keystone_service.auth_url}/auth/tokens",
                         headers={"X-Subject-Token": token}).json()["token"]
        seen[who] = (body["user"]["name"], body["project"]["id"],
                     {role["name"] for role in body["roles"]})
    assert seen[ADMIN][0] == ADMIN and "admin" in seen[ADMIN][2]
    assert seen[MEMBER_A] == (MEMBER_A, keystone_service.project_id(MEMBER_A), {"member", "reader"})
    assert seen[MEMBER_B] == (MEMBER_B, keystone_service.project_id(MEMBER_B), {"member", "reader"})
    assert keystone_service.project_id(MEMBER_A) != keystone_service.project_id(MEMBER_B)


def test_a_wrong_password_gets_no_token(keystone_service):
    auth = v3.Password(auth_url=keystone_service.auth_url, username=MEMBER_A, password="wrong",
                       user_domain_id="default", project_name="project-a",
                       project_domain_id="default")
    with pytest.raises(ks_exc.Unauthorized):
        ks_session.Session(auth=auth).get_token()
