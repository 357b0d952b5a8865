"""Secrets of configured URLs stay out of logs and printed URLs (computed.runtime.secrets)."""

import logging

from computed.runtime.secrets import MASK, SecretFilter, masked_url, url_secrets

URL = "zookeeper://computed:Sekr1t@10.0.0.1:2181,10.0.0.2:2181?timeout=10"


def test_the_secrets_of_a_url_are_its_password_and_credentials():
    assert url_secrets(URL) == ["computed:Sekr1t", "Sekr1t"]
    assert url_secrets("zookeeper://10.0.0.1:2181") == []
    assert url_secrets("zookeeper://user@10.0.0.1:2181") == []
    assert url_secrets("zookeeper://[::1") == []  # unparseable: nothing found, no traceback


def test_masked_url_keeps_user_and_servers():
    assert masked_url(URL) == "zookeeper://computed:***@10.0.0.1:2181,10.0.0.2:2181?timeout=10"
    assert masked_url("zookeeper://10.0.0.1:2181") == "zookeeper://10.0.0.1:2181"


def test_the_filter_masks_a_record_as_kazoo_logs_its_auth_request(caplog):
    logger = logging.getLogger("kazoo.client.test")
    handler = caplog.handler
    handler.addFilter(SecretFilter(url_secrets(URL)))
    try:
        with caplog.at_level(logging.DEBUG, logger="kazoo.client.test"):
            logger.debug("Sending request(xid=%s): %s", -4,
                         "Auth(auth_type=0, scheme='digest', auth='computed:Sekr1t')")
            logger.info("nothing secret here: %s", 42)
            try:
                raise ValueError(f"connect to {URL} failed")
            except ValueError:
                logger.exception("failed")
    finally:
        handler.filters.clear()
    assert "Sekr1t" not in caplog.text
    assert f"auth='{MASK}'" in caplog.text
    assert "nothing secret here: 42" in caplog.text
