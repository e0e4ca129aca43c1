"""Writes tests/file_seconds.json, each test file's seconds in a run (setup, calls and
teardown of its tests, from pytest's JUnit XML): the order `make test` hands files to
its workers, heaviest first (tests/conftest.py), so that neither waits at the end.

    python -m pytest -n 2 --dist loadfile --junitxml=/tmp/run.xml tests
    python tests/file_seconds.py /tmp/run.xml
"""

from __future__ import annotations

import collections
import json
import os
import sys
import xml.etree.ElementTree as ET

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "file_seconds.json")


def file_seconds(junit_xml: str) -> dict[str, float]:
    seconds: dict[str, float] = collections.defaultdict(float)
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/").split("/")
        name = "/".join(path[:2]) + ".py" if len(path) >= 2 else case.get("file", "")
        seconds[name] += float(case.get("time", 0))
    return {k: round(v, 1) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    table = file_seconds(argv[0])
    tmp = TABLE + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    os.replace(tmp, TABLE)
    print(f"{TABLE}: {len(table)} files, {sum(table.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
