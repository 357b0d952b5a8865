"""computed.testing.rabbitmq's virtual host on a reused broker: made by one rabbitmqctl run (an
eval of the broker's own functions), the two commands only where that eval fails."""

from __future__ import annotations

import pytest

from computed.testing import process, rabbitmq


@pytest.fixture
def runs(monkeypatch):
    """The rabbitmqctl command lines run; ``answers`` pops what each answers (an exception is
    raised), "" once they run out."""
    calls: list[list[str]] = []
    answers: list[object] = []

    def run(argv, what, **kw):
        calls.append(list(argv))
        answer = answers.pop(0) if answers else ""
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(process, "run", run)
    monkeypatch.setattr(rabbitmq, "speaks_amqp", lambda port: True)
    return calls, answers


def _erlang_binary(text: str) -> str:
    return f"<<16#{text.encode().hex()}:{len(text.encode()) * 8}>>"


def test_one_eval_makes_the_virtual_host_and_its_permissions(tmp_path, runs):
    calls, answers = runs
    answers.append("ok\n")
    broker = rabbitmq.RabbitMQ(tmp_path, info={"vhost": "computed-ab'\"cd"})
    broker.start()
    assert len(calls) == 1
    assert calls[0][-2] == "eval"
    expression = calls[0][-1]
    name = _erlang_binary("computed-ab'\"cd")
    assert f"rabbit_vhost:add({name}, " in expression
    assert f'set_permissions(<<"guest">>, {name}, <<".*">>, <<".*">>, <<".*">>, ' in expression
    assert broker.info["vhost"] == "computed-ab'\"cd"
    assert broker.info["url"].endswith("/computed-ab'\"cd")


def test_the_commands_where_the_eval_fails(tmp_path, runs):
    calls, answers = runs
    answers.append(process.ServiceError("rabbitmqctl eval failed: undef"))
    broker = rabbitmq.RabbitMQ(tmp_path, info={"vhost": "computed-x"})
    broker.start()
    assert [call[-2:] if call[-2] == "eval" else call[2:] for call in calls] == [
        calls[0][-2:],
        ["delete_vhost", "computed-x"],
        ["add_vhost", "computed-x"],
        ["set_permissions", "-p", "computed-x", "guest", ".*", ".*", ".*"]]
    assert broker.info["vhost"] == "computed-x"


def test_no_control_over_the_broker_shares_its_default_virtual_host(tmp_path, runs):
    calls, answers = runs
    answers.extend([process.ServiceError("eval refused"), process.ServiceError("no delete"),
                    process.ServiceError("not allowed")])
    broker = rabbitmq.RabbitMQ(tmp_path, info={"vhost": "computed-y"})
    broker.start()
    assert broker.info["vhost"] == ""
    assert broker.info["url"].endswith(":5672/")
