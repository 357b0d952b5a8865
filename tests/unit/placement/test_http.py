"""The HTTP layer every Placement request shares, and the allocation requests on it, against a
scripted adapter: microversion, which failures become which errors, and what they name."""

import pytest
from keystoneauth1 import exceptions as ks_exc

from computed.placement import allocations, http
from tests.unit.instance.fakes import Response

CONSUMER = "11111111-1111-1111-1111-111111111111"
NODE = "22222222-2222-2222-2222-222222222222"


class ScriptedAdapter:
    """Answers each request with the next item of ``answers`` (an exception is raised)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests = []

    def request(self, url, method, headers=None, raise_exc=True, json=None):
        self.requests.append((method, url, headers, raise_exc, json))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_every_request_carries_the_microversion_and_never_raises_for_a_status():
    adapter = ScriptedAdapter(Response(404))
    layer = http.PlacementHTTP(adapter)
    assert layer.request("GET", "/resource_providers/x", "x").status_code == 404
    _, _, headers, raise_exc, _ = adapter.requests[0]
    assert headers["OpenStack-API-Version"] == f"placement {http.MICROVERSION}"
    assert raise_exc is False and layer.request_count == 1


@pytest.mark.parametrize("failure", [ks_exc.ConnectFailure("refused"),
                                     ks_exc.ConnectTimeout("slow"),
                                     Response(503, {"errors": [{"detail": "down"}]})])
def test_no_answer_or_a_5xx_is_unavailable_and_names_the_consumer(failure):
    with pytest.raises(http.PlacementUnavailable) as err:
        allocations.remove(ScriptedAdapter(failure), CONSUMER)
    assert err.value.consumer == CONSUMER and f"consumer {CONSUMER}" in str(err.value)


def test_a_refusal_is_an_error_with_placement_code_and_detail():
    refusal = Response(400, {"errors": [{"code": "placement.undefined_code",
                                         "detail": "bad\n  request"}]})
    with pytest.raises(http.PlacementError) as err:
        allocations.put(ScriptedAdapter(refusal), CONSUMER, NODE, "CUSTOM_GOLD",
                        project_id="p", user_id="u")
    assert not isinstance(err.value, http.PlacementUnavailable)
    assert (err.value.status, err.value.code, err.value.detail) == \
        (400, "placement.undefined_code", "bad request")
    assert NODE in str(err.value) and CONSUMER in str(err.value)


def test_a_keystone_refusal_is_an_error_naming_the_provider():
    layer = http.PlacementHTTP(ScriptedAdapter(ks_exc.Unauthorized("no token")))
    with pytest.raises(http.PlacementError) as err:
        layer.request("GET", "/resource_providers/p-1", "p-1")
    assert not isinstance(err.value, http.PlacementUnavailable)
    assert err.value.uuid == "p-1" and str(err.value).startswith("provider p-1: GET")


def test_allocation_outcomes():
    taken = Response(409, {"errors": [{"code": "placement.undefined_code"}]})
    adapter = ScriptedAdapter(Response(204), taken, Response(204), Response(404),
                              Response(200, {"allocations": {NODE: {"resources": {"C": 1}}}}))
    assert allocations.put(adapter, CONSUMER, NODE, "C", project_id="p", user_id="u")
    assert not allocations.put(adapter, CONSUMER, NODE, "C", project_id="p", user_id="u")
    assert allocations.remove(adapter, CONSUMER)
    assert not allocations.remove(adapter, CONSUMER)  # idempotent
    assert allocations.read(adapter, CONSUMER) == {NODE: {"C": 1}}
    body = adapter.requests[0][4]
    assert body["consumer_type"] == allocations.CONSUMER_TYPE
    assert (body["project_id"], body["user_id"]) == ("p", "u")


SERVER_ERROR = Response(500, {"errors": [{"code": "placement.undefined_code",
                                          "detail": "A string literal cannot contain NUL"}]})


def test_a_500_that_the_request_causes_is_not_unavailable_and_is_sent_twice_only():
    # The request gets 500 twice while the probe (a read of Placement's database) is answered.
    adapter = ScriptedAdapter(SERVER_ERROR, SERVER_ERROR, Response(200, {"resource_providers": []}))
    layer = http.PlacementHTTP(adapter, sleep=lambda _s: None)
    with pytest.raises(http.PlacementRequestFailed) as err:
        layer.request("POST", "/resource_providers", NODE, body={"name": "a\x00b"})
    assert not isinstance(err.value, http.PlacementUnavailable)
    assert err.value.uuid == NODE and err.value.status == 500
    assert str(err.value).startswith(f"provider {NODE}: POST /resource_providers: HTTP 500")
    assert "the request is the cause" in str(err.value) and "NUL" in str(err.value)
    assert [(m, u) for m, u, *_ in adapter.requests] == [
        ("POST", "/resource_providers"), ("POST", "/resource_providers"), ("GET", http.PROBE)]


@pytest.mark.parametrize("probe", [SERVER_ERROR, Response(503), ks_exc.ConnectFailure("gone")])
def test_a_500_while_placement_fails_everything_is_unavailable(probe):
    adapter = ScriptedAdapter(SERVER_ERROR, SERVER_ERROR, probe)
    with pytest.raises(http.PlacementUnavailable) as err:
        http.PlacementHTTP(adapter, sleep=lambda _s: None).request(
            "PUT", f"/resource_providers/{NODE}/inventories", NODE, body={})
    assert err.value.status == 500 and err.value.uuid == NODE


def test_a_500_whose_retry_is_answered_gives_that_answer():
    adapter = ScriptedAdapter(SERVER_ERROR, Response(409))
    layer = http.PlacementHTTP(adapter, sleep=lambda _s: None)
    assert layer.request("GET", "/resource_providers/x", "x").status_code == 409
    assert len(adapter.requests) == 2 and layer.request_count == 2


@pytest.mark.parametrize("retry,probe,verdict", [
    (200, None, "answered"), (409, None, "answered"), (500, 200, "request"),
    (500, 500, "unavailable"), (500, None, "unavailable"), (None, None, "unavailable"),
    (503, None, "unavailable"), (500, 404, "unavailable")])
def test_judge_500(retry, probe, verdict):
    assert http.judge_500(retry, probe) == verdict
