"""What the local run offers a newcomer's first ``openstack server create``: the image ``demo``
in its Glance and the flavor ``bm.demo`` in its compute API.

Owns their names and content, so that ``openstack server create --image demo --key-name k
--user-data FILE --flavor bm.demo`` works on the local run as README.md shows it:

* :func:`ensure_image`: a public, active image named ``demo`` in the run's Glance (Glance
  without Keystone: :mod:`computed.testing.glance`), uploaded when Glance has none of that
  name. Its bytes are a small raw disk of zeros: Ironic's fake deploy never writes them.
* :func:`ensure_flavor`: a public flavor ``bm.demo`` asking for one node of the demo nodes'
  resource class (:func:`flavor_request`, pure), created through the compute API (as the
  noauth2 admin) when the API has no flavor of that name; one already there is left as it is.

Guarantees: each is idempotent (it makes only what is missing); every failure is
:class:`SetupError` with one line saying what did not work (and where the API's log is),
never a half-made flavor left unnoticed: a flavor whose extra specs were refused is deleted
again.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from computed.providers.state import normalise_resource_class
from computed.testing.process import ServiceError

IMAGE_NAME = "demo"
#: 64 KiB of zeros as a raw, bare image: small to upload, never written anywhere.
IMAGE_DATA = b"\0" * 65536
FLAVOR_NAME = "bm.demo"
#: The noauth2 admin (tools.demo.view.API_TOKEN) at the microversion the screen exports.
HEADERS = {"X-Auth-Token": "admin:admin", "OpenStack-API-Version": "compute 2.61",
           "Content-Type": "application/json", "Accept": "application/json"}
#: Seconds computed-api gets to answer once started (imports on a loaded machine).
API_TIMEOUT = 180.0


class SetupError(ServiceError):
    """The demo image or flavor could not be made (the message says which and why, and names
    the log to read, as a service that failed to start)."""


def flavor_request(resource_class: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The body of ``POST /flavors`` and the extra specs of ``bm.demo`` for nodes of Ironic's
    ``resource_class``: one unit of its custom class, the standard classes at 0 (as Nova's
    Ironic flavors); ``ram``, ``vcpus`` and ``disk`` are shown to clients, not scheduled on."""
    flavor = {"name": FLAVOR_NAME, "ram": 1024, "vcpus": 1, "disk": 10,
              "os-flavor-access:is_public": True,
              "description": f"one {resource_class} node of the local run"}
    specs = {f"resources:{normalise_resource_class(resource_class)}": "1",
             "resources:VCPU": "0", "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}
    return flavor, specs


def ensure_image(glance: Any) -> dict[str, Any]:
    """The image ``demo`` of ``glance`` (a started :class:`computed.testing.glance.Glance`),
    uploaded public and active when it has none."""
    try:
        found = [image for image in glance.images(name=IMAGE_NAME)
                 if image["status"] == "active"]
        image = found[0] if found else glance.upload(IMAGE_NAME, data=IMAGE_DATA,
                                                     visibility="public")
    except (OSError, ValueError) as exc:
        raise SetupError(f"uploading the image {IMAGE_NAME!r} to Glance {glance.url} failed: "
                         f"{exc} (its log: {glance.log})") from None
    if image.get("status") != "active":
        raise SetupError(f"Glance {glance.url} left the image {IMAGE_NAME!r} "
                         f"{image.get('status')}, not active (its log: {glance.log})")
    return image


def _call(url: str, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=HEADERS)
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else None


def _refusal(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read() or b"{}")
        message = next(iter(body.values()))["message"]
    except (ValueError, StopIteration, KeyError, TypeError, AttributeError):
        message = exc.reason
    return f"{exc.code} {message}"


def wait_for_api(base: str, running: Callable[[], bool], log: Path,
                 timeout: float = API_TIMEOUT) -> None:
    """Return once the compute API at ``base`` (its ``/v2.1``) answers; SetupError when its
    process exits first (``running`` false) or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _call(base)
            return
        except urllib.error.HTTPError as exc:
            raise SetupError(f"the compute API {base} answered {_refusal(exc)} "
                             f"(its log: {log})") from None
        except OSError:
            pass
        if not running():
            raise SetupError(f"the compute API exited before answering (its log: {log})")
        if time.monotonic() > deadline:
            raise SetupError(f"the compute API {base} did not answer in {timeout:.0f} s "
                             f"(its log: {log})")
        time.sleep(0.5)


def ensure_flavor(base: str, resource_class: str, log: Path) -> dict[str, Any]:
    """The flavor ``bm.demo`` of the compute API at ``base`` (its ``/v2.1``), created when
    there is none of that name."""
    flavor, specs = flavor_request(resource_class)
    try:
        for existing in _call(f"{base}/flavors/detail?is_public=none")["flavors"]:
            if existing["name"] == FLAVOR_NAME:
                return existing
        made = _call(f"{base}/flavors", "POST", {"flavor": flavor})["flavor"]
        try:
            made["extra_specs"] = _call(f"{base}/flavors/{made['id']}/os-extra_specs", "POST",
                                        {"extra_specs": specs})["extra_specs"]
        except (OSError, ValueError):
            _call(f"{base}/flavors/{made['id']}", "DELETE")
            raise
        return made
    except urllib.error.HTTPError as exc:
        raise SetupError(f"creating the flavor {FLAVOR_NAME} failed: {_refusal(exc)} "
                         f"(the compute API's log: {log})") from None
    except (OSError, ValueError) as exc:
        raise SetupError(f"creating the flavor {FLAVOR_NAME} failed: {exc} "
                         f"(the compute API's log: {log})") from None
