"""The daemon loads the [ironic]
auth_type = none
endpoint_override = http://127.0.0.1:1

[filter_scheduler] pipeline its build retries schedule with, before it
connects to anything: a class that cannot be loaded is a configuration error naming the option."""

from tests import cli

CONF = """
[DEFAULT]
host = c1
transport_url = rabbit://guest:guest@127.0.0.1:1/

[coordination]
backend_url = zookeeper://127.0.0.1:1

[database]
connection = sqlite:///{tmp}/computed.sqlite

[placement]
auth_type = none
endpoint_override = http://127.0.0.1:1

[ironic]
auth_type = none
endpoint_override = http://127.0.0.1:1

[filter_scheduler]
available_filters = no.such.module.NoSuchFilter
enabled_filters = NoSuchFilter
"""


def test_a_filter_that_cannot_be_loaded_stops_the_daemon_before_it_connects(tmp_path):
    conf = tmp_path / "computed.conf"
    conf.write_text(CONF.format(tmp=tmp_path))
    result = cli.run("computed", "--config-file", conf, home=tmp_path)
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "[filter_scheduler]" in lines[0], result.stderr
    assert not (tmp_path / "computed.sqlite").exists()  # nothing was opened
