"""tests/python/conftest.py — the Python tests under ctest, with the C tests'
conventions (tests/test_util.h): every skipped case prints one line

    SKIPPED: <test program>: <case>: <reason>

which .ci/run lists, and a run whose every case skipped exits 77, which
the ctest entry declares as its SKIP_RETURN_CODE: skipped, never passed.
EDGERT_TEST_NAME names the program (tests/CMakeLists.txt sets it)."""
import os

import pytest

_outcomes = {"skipped": 0, "other": 0}


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        if report.skipped:
            _outcomes["skipped"] += 1
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
            reason = str(reason).removeprefix("Skipped: ")
            name = os.environ.get("EDGERT_TEST_NAME", "pytest")
            print(f"\nSKIPPED: {name}: {report.nodeid.split('::')[-1]}: {reason}")
        else:
            _outcomes["other"] += 1


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and _outcomes["skipped"] and not _outcomes["other"]:
        print(f"\nall {_outcomes['skipped']} cases skipped (exit 77: ctest reports the test as "
              "skipped)")
        session.exitstatus = 77


@pytest.fixture(scope="session")
def edgert_cli():
    """The edgert command line (with the emulator in front in a cross build)."""
    cli = os.environ.get("EDGERT_TEST_CLI")
    if not cli:
        pytest.fail("EDGERT_TEST_CLI is not set (tests/CMakeLists.txt sets it)")
    return cli.split()


# What runs no edgert code (conversions, the numpy forward pass) gives the same
# result in every build: the plain native build checks it; a sanitizer build
# (EDGERT_TEST_SANITIZED) or a cross build under an emulator
# (EDGERT_TEST_EMULATED) skips it, saying so, and keeps what runs edgert.
native_only = pytest.mark.skipif(
    "1" in (os.environ.get("EDGERT_TEST_EMULATED"), os.environ.get("EDGERT_TEST_SANITIZED")),
    reason="runs no edgert code: checked by the plain native build")
