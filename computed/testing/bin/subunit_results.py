"""Read a subunit v2 stream into per-test results, as JSON (run with Tempest's virtualenv).

``python subunit_results.py RESULTS.subunit OUT.json``: one object per test, ``{"id", "status",
"reason", "seconds"}``, status being subunit's (``success``, ``fail``, ``skip``, ...); reason is
the skip reason, or the last lines of a failure's traceback. ``tempest run --subunit`` first
lists every test it will run (status ``exists``); a test's later result replaces that, so a stream
cut short (a run ended by its timeout) leaves the tests it never reached as ``exists``: not run.
A test of a class whose setup skipped or failed takes the class's status (``by_class``).
"""

import json
import sys

import subunit
import testtools


def main() -> None:
    source, target = sys.argv[1], sys.argv[2]
    tests: dict[str, dict] = {}

    def on_test(test: dict) -> None:
        details = test["details"]
        reason = ""
        for key in ("reason", "traceback"):
            if key in details:
                reason = details[key].as_text()
                break
        if test["status"] == "fail" and reason:
            # The exception's own lines (a schema error's message is at its top), at most 40.
            lines = reason.strip().splitlines()
            start = max((i for i, line in enumerate(lines) if line.startswith("Traceback")),
                        default=0)
            body = [line for line in lines[start:] if not line.startswith("  ")]
            reason = "\n".join(body[1:41] or lines[-12:])
        start, stop = test["timestamps"]
        seconds = (stop - start).total_seconds() if start and stop else None
        if test["status"] == "exists" and test["id"] in tests:
            return
        tests[test["id"]] = {"id": test["id"], "status": test["status"],
                             "reason": reason.strip(), "seconds": seconds}

    with open(source, "rb") as stream:
        case = subunit.ByteStreamToStreamResult(stream, non_subunit_name="stdout")
        result = testtools.StreamToDict(on_test)
        result.startTestRun()
        try:
            case.run(result)
        finally:
            result.stopTestRun()
    # A class whose setUpClass skipped or failed is one event named "setUpClass (module.Class)";
    # its tests stay listed only: each takes the class's status and reason, so that counts are
    # per test (stestr's own counts a class as one).
    classes = {}
    for test in tests.values():
        if test["id"].startswith("setUpClass (") and test["status"] in ("skip", "fail"):
            classes[test["id"][len("setUpClass ("):-1] + "."] = test
    counted = set()
    for test in tests.values():
        if test["status"] == "exists":
            for prefix, setup in classes.items():
                if test["id"].startswith(prefix):
                    test.update(status=setup["status"], reason=setup["reason"], by_class=True)
                    counted.add(setup["id"])
                    break
    # The class's event is then counted through its tests, not once more.
    for setup_id in counted:
        del tests[setup_id]
    with open(target, "w") as out:
        json.dump(list(tests.values()), out, indent=1)


if __name__ == "__main__":
    main()
