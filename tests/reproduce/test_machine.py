"""The machine record: no path, no host, and two records compared on what moves a float32 result."""

import json

from codesign.reproduce.machine import MACHINE_KEYS, machine_record, machine_text, same_machine


def test_machine_record_names_no_path_and_matches_itself():
    record = machine_record()
    assert set(MACHINE_KEYS) <= set(record)
    assert record["threads"] == 1 and record["cpu_capability"] in ("DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX",
                                                                   "SVE256", "NEON")
    assert "/" not in json.dumps({k: v for k, v in record.items() if k != "torch"})
    assert same_machine(record, dict(record))
    assert not same_machine(record, {**record, "cpu_capability": "OTHER"})
    assert not same_machine(record, None)
    assert machine_text(record).startswith("Machine: ") and "1 torch thread(s)" in machine_text(record)
