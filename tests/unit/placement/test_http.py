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
