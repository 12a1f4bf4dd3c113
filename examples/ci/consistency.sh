#!/usr/bin/env bash
# A streaming job's consistency under crashes, as one CI step: the test `streamchaos init` writes, run with pytest.
# Copy it into your repository beside github-workflow.yml (or call it from any CI). The runner needs a Java 17
# JDK, PostgreSQL's server binaries for a postgres: sink, 2 cores and 3 GiB (docs/jobs.md, "In CI").
#
#   JOB     your job's entry point, path/to/job.py:function or module:function   (required)
#   SCHEMA  the payload's fields as Spark DDL                                     (required)
#   SINK    postgres:TABLE, sqlite:TABLE or parquet                               (required)
#   KEY     an upsert sink's key columns, comma-separated                          (optional)
#   STREAMCHAOS_PACKAGE  what pip installs: streamchaos, a git URL or a path        (default: streamchaos)
#   STREAMCHAOS_VENV     the virtual environment, made if missing: cache it         (default: .venv-streamchaos)
#   TEST_FILE            the test init writes once; commit it to keep your edits    (default below)
#   CHAOS_TRIALS         trials per check (default 3: every canonical fault window)
# Arguments are passed on to pytest (e.g. --chaos-events 2000).
set -euo pipefail

: "${JOB:?set JOB to the entry point of your job, e.g. jobs/orders.py:run}"
: "${SCHEMA:?set SCHEMA to the fields of the payload as Spark DDL, e.g. order_id STRING, amount LONG, ts TIMESTAMP}"
: "${SINK:?set SINK to where the job writes: postgres:TABLE, sqlite:TABLE or parquet}"
venv="${STREAMCHAOS_VENV:-.venv-streamchaos}"
test_file="${TEST_FILE:-tests/test_streaming_consistency.py}"

if [ ! -x "$venv/bin/streamchaos" ]; then
  # Current Debian and Ubuntu refuse pip installs into the system's Python: a virtual environment of its own.
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet "${STREAMCHAOS_PACKAGE:-streamchaos}[test]"
fi
# shellcheck disable=SC1091
. "$venv/bin/activate"

if [ ! -f "$test_file" ]; then
  mkdir -p "$(dirname "$test_file")"
  streamchaos init "$JOB" --schema "$SCHEMA" --sink "$SINK" ${KEY:+--key "$KEY"} --out "$test_file"
fi
exec python -m pytest -q -p no:cacheprovider "$test_file" --chaos-trials "${CHAOS_TRIALS:-3}" \
  --chaos-report chaos-report.html "$@"
