"""The part of Cloud Build v1's published schema that spotcron's requests use: field names and JSON types.

Taken from the Cloud Build API's discovery document (https://cloudbuild.googleapis.com/$discovery/
rest?version=v1, schemas Build, BuildStep, Source, StorageSource, BuildOptions, Results,
BuiltImage), which is generated from googleapis' google/devtools/cloudbuild/v1/cloudbuild.proto.
Only the fields listed here may appear in a request body; a field of another type, or one not
listed, fails the fake's check. Output-only fields (id, status, results, createTime, logUrl...)
are never sent. The fake also parses each body strictly with the client library's own Build
message, so a name Google does not know is refused even if it were listed here by mistake.
"""

from __future__ import annotations

from typing import Any

STRING, ARRAY, OBJECT = "string", "array", "object"
# "format: int64" fields travel as JSON strings; "format: google-duration" as "1200s".

SCHEMAS: dict[str, dict[str, Any]] = {
    "Build": {
        "source": ("Source",),
        "steps": (ARRAY, ("BuildStep",)),
        "images": (ARRAY, STRING),
        "tags": (ARRAY, STRING),
        "timeout": STRING,  # google-duration
        "serviceAccount": STRING,
        "options": ("BuildOptions",),
        "logsBucket": STRING,
        "substitutions": OBJECT,
    },
    "Source": {
        "storageSource": ("StorageSource",),
    },
    "StorageSource": {
        "bucket": STRING,
        "object": STRING,
        "generation": STRING,  # int64
    },
    "BuildStep": {
        "name": STRING,
        "args": (ARRAY, STRING),
        "env": (ARRAY, STRING),
        "dir": STRING,
        "id": STRING,
        "entrypoint": STRING,
        "waitFor": (ARRAY, STRING),
    },
    "BuildOptions": {
        # enum LoggingMode, by name and number (the client sends numbers: $alt=json;enum-encoding=int)
        "logging": ("enum", {"LOGGING_UNSPECIFIED": 0, "LEGACY": 1, "GCS_ONLY": 2, "STACKDRIVER_ONLY": 3,
                             "NONE": 4, "CLOUD_LOGGING_ONLY": 5}),
        "machineType": STRING,
    },
}
BUILD_REQUIRED = ("steps",)  # "Required. The operations to be performed on the workspace."
# A Build.tags item: "^[\w][\w.-]{0,127}$" (the field's description in the discovery document).
TAG_PATTERN = r"^[\w][\w.-]{0,127}$"

_JSON_TYPES = {STRING: str, ARRAY: list, OBJECT: dict}


def problems(value: Any, schema: str = "Build", where: str = "build") -> list[str]:
    """What in `value` does not match the schema `schema`: unknown names and wrong types."""
    out: list[str] = []
    if not isinstance(value, dict):
        return [f"{where}: expected an object ({schema}), got {type(value).__name__}"]
    fields = SCHEMAS[schema]
    for name, item in value.items():
        if name not in fields:
            out.append(f"{where}.{name}: no such field in {schema}")
            continue
        out += _check(item, fields[name], f"{where}.{name}")
    return out


def _check(item: Any, kind: Any, where: str) -> list[str]:
    if isinstance(kind, str):
        return [] if isinstance(item, _JSON_TYPES[kind]) else [f"{where}: expected {kind}, got {type(item).__name__}"]
    if kind[0] == "enum":
        known = item in kind[1] if isinstance(item, str) else item in kind[1].values()
        return [] if known else [f"{where}: {item!r} is not one of {sorted(kind[1])}"]
    if kind[0] == ARRAY:
        if not isinstance(item, list):
            return [f"{where}: expected array, got {type(item).__name__}"]
        return [p for index, element in enumerate(item) for p in _check(element, kind[1], f"{where}[{index}]")]
    return problems(item, kind[0], where)
