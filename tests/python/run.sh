#!/bin/sh
# tests/python/run.sh PYTHON TEST_FILE — one Python test file under ctest:
# pytest in the project's virtual environment (.ci/deps makes it from
# .ci/requirements.txt). Without that environment the test reports skipped
# (exit 77, the ctest entry's SKIP_RETURN_CODE) with the reason in the
# "SKIPPED: <program>: <case>: <reason>" form .ci/run lists; never passed.
py=$1
file=$2
if [ ! -x "$py" ] || ! "$py" -c 'import pytest, numpy' 2>/dev/null; then
  echo "SKIPPED: ${EDGERT_TEST_NAME:-pytest}: all: $py cannot run pytest: run .ci/deps," \
       "which installs .ci/requirements.txt there from PyPI"
  exit 77
fi
# No caches written into the source tree.
PYTHONDONTWRITEBYTECODE=1 exec "$py" -m pytest -q -rs -p no:cacheprovider "$file"
