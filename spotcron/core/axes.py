"""Matrix axes: a benchmark sweep written as the parameters that vary, expanded to its cross product.

    axes:
      - cpu4: {machine: {type: e2-standard-4}}
        t4:   {machine: {type: n1-standard-8, gpu: {type: nvidia-tesla-t4, count: 1}},
               image: example/bench:cuda}
      - b64:  {env: {BATCH: "64"}}
        b256: {env: {BATCH: "256"}}

is the matrix of four entries `cpu4-b64`, `cpu4-b256`, `t4-b64`, `t4-b256`: each axis is a mapping
of labels to matrix-entry fields, an entry takes one label of every axis, and its name joins the
labels with `-` in axis order. Fields merge: `machine` and `env` key by key, later axes winning;
any other field (`image`, `args`, `repeat`, `local`, `build`) may be set by one axis only, so no
setting is silently dropped. The expanded entries are what the job's runs, records and report
name; `axes` and `matrix` are exclusive.
"""

from __future__ import annotations

import itertools
from typing import Any

MERGED = ("machine", "env")
MAX_AXES = 4


def expand_axes(data: Any) -> Any:
    """`data` (a job file's mapping) with `axes` replaced by the `matrix` it stands for."""
    if not isinstance(data, dict) or "axes" not in data:
        return data
    axes = data["axes"]
    if "matrix" in data:
        raise ValueError("axes and matrix are both set; write the sweep as axes (a cross product) or the entries "
                         "as matrix, not both")
    if not isinstance(axes, list) or not axes or len(axes) > MAX_AXES:
        raise ValueError(f"axes must be a list of 1 to {MAX_AXES} mappings of label to entry fields, e.g. "
                         "[{cpu4: {machine: {type: e2-standard-4}}, t4: {...}}, {b64: {env: {BATCH: '64'}}}]")
    for index, axis in enumerate(axes):
        if not isinstance(axis, dict) or not axis:
            raise ValueError(f"axes[{index}] is not a mapping of labels to entry fields; write e.g. "
                             "{cpu4: {machine: {type: e2-standard-4}}}")
        for label, fields in axis.items():
            if not isinstance(label, str) or not isinstance(fields, dict | type(None)):
                raise ValueError(f"axes[{index}].{label}: a label maps to entry fields (machine, env, image, args, "
                                 "repeat, local, build), e.g. {env: {BATCH: '64'}}")
            if fields and "name" in fields:
                raise ValueError(f"axes[{index}].{label}: an axis entry has no name; the entry's name is its labels "
                                 "joined with '-'")
    matrix = []
    for combination in itertools.product(*(list(axis.items()) for axis in axes)):
        entry: dict[str, Any] = {"name": "-".join(label for label, _ in combination)}
        owner: dict[str, str] = {}
        for label, fields in combination:
            for key, value in (fields or {}).items():
                if key in MERGED and isinstance(value, dict):
                    entry[key] = {**entry.get(key, {}), **value}
                elif key in entry:
                    raise ValueError(f"axes: {key} is set by both {owner[key]!r} and {label!r}; set it in one axis "
                                     f"only (machine and env merge, other fields do not)")
                else:
                    entry[key], owner[key] = value, label
        matrix.append(entry)
    rest = {key: value for key, value in data.items() if key != "axes"}
    return {**rest, "matrix": matrix}
