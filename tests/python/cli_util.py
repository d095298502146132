"""tests/python/cli_util.py — running the `edgert` binary from a pytest
(edgert_cli, conftest.py's fixture, is its argv prefix): one way to run it
and to expect a failure, for every test here."""
import subprocess


def cli(edgert_cli, *args, check=True):
    """Run `edgert args`; with check, a nonzero exit fails the test with
    everything the command printed."""
    r = subprocess.run(edgert_cli + [str(a) for a in args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"edgert {' '.join(map(str, args))}: exit {r.returncode}\n"
                             f"{r.stdout}\n{r.stderr}")
    return r


def expect(edgert_cli, code, must, *args):
    """Run `edgert args`: it must exit `code` and its stderr hold each of
    `must`."""
    r = cli(edgert_cli, *args, check=False)
    print(r.stderr)
    assert r.returncode == code, f"exit {r.returncode}, expected {code}: {r.stderr}"
    for m in must:
        assert m in r.stderr, f"{m!r} not in {r.stderr!r}"
    return r
