"""keystone-manage bootstrap's arguments: a password starting with '-' stays a password."""

import argparse

import pytest

from computed.testing.keystone import bootstrap_arguments


@pytest.mark.parametrize("password", ["-HThLUEseuuwnlkXknVflQ", "--x", "plain_Pass-1"])
def test_any_urlsafe_password_reaches_argparse_as_the_passwords_value(password):
    # keystone-manage parses its options with argparse, as this parser does.
    parser = argparse.ArgumentParser()
    parser.add_argument("command")
    for option in ("--bootstrap-password", "--bootstrap-admin-url", "--bootstrap-public-url",
                   "--bootstrap-internal-url", "--bootstrap-region-id"):
        parser.add_argument(option)
    parsed = parser.parse_args(bootstrap_arguments(password, "http://127.0.0.1:5000"))
    assert parsed.bootstrap_password == password
    assert parsed.bootstrap_public_url == "http://127.0.0.1:5000/v3"
