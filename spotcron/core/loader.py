"""Job files → validated JobSpecs, or one ConfigError that lists every problem in every file.

YAML is composed into nodes first so each problem can name its line. A job is named after its
file (`jobs/bot.yaml` → `bot`): one source of truth, so renaming the file renames the job and
two files can never claim the same name silently. A `name:` key is tolerated only when it
agrees with the file name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from spotcron.core import catalog
from spotcron.core.account_sharing import shared_account_problems
from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.errors import ConfigError, CronError, Problem
from spotcron.core.field_hints import INTERNAL_FIELDS, suggest_field
from spotcron.core.images import build_problems
from spotcron.core.settings import Settings
from spotcron.core.spec import (
    ENTRY_NAME_REUSED,
    IMAGE_MISSING,
    JOB_NAME_MAX,
    MAX_RUN_SECONDS,
    MIN_RUN_SECONDS,
    RULE_FIELDS,
    SECRETS_RULE,
    JobSpec,
    name_problem,
)

JOB_SUFFIXES = (".yaml", ".yml")
DEFAULT_GRACE: int = Settings.model_fields["grace"].default
_CUSTOM_TYPE = re.compile(r"^[a-z0-9]+-custom-\d+-\d+(-ext)?$")
_MISSING_HINTS = {
    ("schedule",): "add e.g. schedule: \"0 */4 * * *\"",
    ("image",): "add e.g. image: us-docker.pkg.dev/my-project/spotcron/bot:latest",
    ("command",): "add e.g. command: python3 job.py",
    ("name",): "add e.g. name: cpu",
    ("type",): "add e.g. type: nvidia-tesla-t4",
}
Loc = tuple[str | int, ...]


def job_files(paths: Iterable[Path | str]) -> tuple[list[Path], list[Problem]]:
    """The job files named by `paths`: files as given, directories → their *.yaml/*.yml files."""
    files: list[Path] = []
    problems: list[Problem] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and _is_job_file(p))
        elif path.is_file():
            if path.suffix not in JOB_SUFFIXES:
                problems.append(Problem(str(path), None, "", "not a job file: job files end in .yaml or .yml"))
                continue
            found = [path]
        elif path.suffix in JOB_SUFFIXES:
            problems.append(Problem(str(path), None, "", "no such file"))
            continue
        else:
            here = "" if path.is_absolute() else f" in {Path.cwd()}"
            problems.append(Problem(str(path), None, "", f"no such folder{here}: `spotcron init` starts one with a "
                                                         f"first job, or point --jobs (SPOTCRON_JOBS) at yours"))
            continue
        for file in found:
            if file.resolve() not in seen:  # `validate jobs jobs/bot.yaml` checks bot once
                seen.add(file.resolve())
                files.append(file)
    return files, problems


def _is_job_file(path: Path) -> bool:
    stem = path.name.rsplit(".", 1)[0]
    return (path.suffix in JOB_SUFFIXES and not path.name.startswith(".")
            and stem != "schema" and not stem.endswith(".schema"))


def load_jobs(paths: Iterable[Path | str], *, grace: int = DEFAULT_GRACE,
              retention_days: int | None = None) -> list[JobSpec]:
    """Every job in `paths`, sorted by name; ConfigError with all problems of all files otherwise.

    `grace` is the stack's extra VM lifetime beyond a job's timeout (checked against Compute
    Engine's maxRunDuration range); `retention_days`, when given, is the stack's
    results_retention_days, which must outlast every job's VM plus a margin.
    """
    specs, problems = check_jobs(paths, grace=grace, retention_days=retention_days)
    if problems:
        raise ConfigError(problems)
    return specs


def check_jobs(paths: Iterable[Path | str], *, grace: int = DEFAULT_GRACE,
               retention_days: int | None = None) -> tuple[list[JobSpec], list[Problem]]:
    """The jobs of the files that are valid, sorted by name, and every problem of the others.

    What a long-running reader (`spotcron up`) needs: one broken file must not stop the rest.
    """
    files, problems = job_files(paths)
    specs: list[JobSpec] = []
    by_name: dict[str, list[Path]] = {}
    for file in files:
        spec, file_problems = check_job_file(file, grace=grace, retention_days=retention_days)
        problems.extend(file_problems)
        if spec is not None:
            specs.append(spec)
        by_name.setdefault(file.stem, []).append(file)
    for name, same in by_name.items():
        if len(same) > 1:
            specs = [s for s in specs if s.name != name]
            for file in same:
                others = ", ".join(str(o) for o in same if o != file)
                problems.append(Problem(str(file), None, "", f"job name {name!r} is also defined by {others}; a "
                                        f"job is named after its file, so each file name must be unique"))
    shared = shared_account_problems({s.name: s.service_account for s in specs},
                                     {s.name: [ref.secret for ref in s.all_secrets().values()] for s in specs})
    for spec in [s for s in specs if s.name in shared]:
        specs.remove(spec)
        problems.append(Problem(str(by_name[spec.name][0]), None, "service_account", shared[spec.name]))
    return sorted(specs, key=lambda s: s.name), _sorted(problems)


def load_job_file(path: Path | str, *, grace: int = DEFAULT_GRACE, retention_days: int | None = None) -> JobSpec:
    spec, problems = check_job_file(Path(path), grace=grace, retention_days=retention_days)
    if problems or spec is None:
        raise ConfigError(_sorted(problems))
    return spec


def _sorted(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.file, p.line or 0))


# --- one file ----------------------------------------------------------------------------------


@dataclass
class _File:
    """A parsed job file: its data and the line of every key and list item, by path."""

    name: str
    data: Any = None
    lines: dict[Loc, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def line(self, loc: Loc) -> int | None:
        for end in range(len(loc), -1, -1):
            if loc[:end] in self.lines:
                return self.lines[loc[:end]]
        return None

    def add(self, loc: Loc, message: str) -> None:
        line = self.line(loc)
        self.problems.append(Problem(self.name, line, field_path(loc), message))


def field_path(loc: Loc) -> str:
    """("matrix", 0, "machine", "type") → "matrix[0].machine.type"."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def check_job_file(path: Path, *, grace: int = DEFAULT_GRACE,
                   retention_days: int | None = None) -> tuple[JobSpec | None, list[Problem]]:
    """The job in `path` and the problems found; the spec is None when there is any problem."""
    file = _File(str(path))
    _parse(path, file)
    if file.problems and file.data is None:  # unreadable or not YAML; a duplicate key still leaves the rest to check
        return None, file.problems
    data = file.data
    if data is None:
        file.add((), "the file is empty; a job needs at least schedule: and image:")
        return None, file.problems
    if not isinstance(data, dict):
        file.problems.append(Problem(file.name, file.lines.get((), 1), "",
                                     f"a job file is a mapping of fields (schedule: ..., image: ...), "
                                     f"not {_kind(data)}"))
        return None, file.problems

    data = dict(data)
    name = path.stem
    problem = name_problem(name, JOB_NAME_MAX, "job name")
    if problem:
        file.problems.append(Problem(file.name, None, "", f"the job name comes from the file name: {problem}; "
                                                          f"rename the file"))
        name = "placeholder"  # keep validating the rest of the file
    if "variant" in data:
        file.add(("variant",), "reserved: spotcron sets it on the copy of the job made for each matrix entry; "
                               "define entries under matrix: instead")
        del data["variant"]
    if "repeat_index" in data:
        file.add(("repeat_index",), "reserved: spotcron numbers the copies that repeat: makes; set repeat: N "
                                    "instead")
        del data["repeat_index"]
    if "deploy_account" in data:
        file.add(("deploy_account",), "reserved: deploy sets it on a job whose secrets run under an account it "
                                      "made; name the job's own account with service_account: instead")
        del data["deploy_account"]
    if "name" in data:
        if data["name"] != path.stem:
            file.add(("name",), f"{data['name']!r} does not match the file name {path.name!r}; a job is named "
                                f"after its file: rename the file or remove this key")
        del data["name"]

    _check_raw(data, file)
    spec = None
    try:
        spec = JobSpec.model_validate({**data, "name": name})
    except ValidationError as exc:
        errors = exc.errors()
        for error in errors:
            _report(error, file)
        _check_the_rest(data, name, errors, path, file, grace, retention_days)
    if spec is not None:
        _check_semantics(spec, data, path, file, grace, retention_days)
    return (spec if not file.problems else None), file.problems


def _check_semantics(spec: JobSpec, data: dict[str, Any], path: Path, file: _File, grace: int,
                     retention_days: int | None) -> None:
    _check_spec(spec, data, file, grace)
    for loc, message in build_problems(spec, path.resolve().parent.parent):
        file.add(loc, message)
    if retention_days is not None:
        _check_retention(spec, data, file, grace, retention_days)


_STAND_INS = {"schedule": "0 0 * * *"}  # a required field left out to check the rest
# What each check reads besides its own field: left out, the check would judge a default, not the file.
_READS = {"benchmark": {"matrix"}, "notify": {"timeout"}, "matrix": {"machine", "repeat"}, "machine": {"matrix"},
          "metadata_access": {"service_account"}}


def _check_the_rest(data: dict[str, Any], name: str, errors: list[Any], path: Path, file: _File, grace: int,
                    retention_days: int | None) -> None:
    """The checks that need a parsed job, run on the file without its broken top-level fields.

    A user with several mistakes sees them all at once: a bad schedule must not hide a timeout
    beyond Compute Engine's limit. Problems of the fields left out are the ones already reported;
    an error that names no field (the model as a whole) leaves nothing to isolate.
    """
    broken = {error["loc"][0] for error in errors if error.get("loc")}
    if not broken or any(not error.get("loc") for error in errors):
        return
    rest = {key: value for key, value in data.items() if key not in broken}
    try:
        spec = JobSpec.model_validate({**{k: v for k, v in _STAND_INS.items() if k in broken}, **rest,
                                       "name": name})
    except ValidationError:
        return
    scratch = _File(file.name, file.data, file.lines)
    _check_semantics(spec, rest, path, scratch, grace, retention_days)
    reported = {(p.line, p.field, p.message) for p in file.problems}
    for problem in scratch.problems:
        top = problem.field.split(".")[0].split("[")[0]
        if top not in broken and not _READS.get(top, set()) & broken \
                and (problem.line, problem.field, problem.message) not in reported:
            file.problems.append(problem)


def _parse(path: Path, file: _File) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        file.add((), f"cannot read the file: {exc}")
        return
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            file.data = loader.construct_document(node)  # also resolves `<<` merges in the nodes
            _walk(node, (), file)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        hint = ""
        if "\\t" in str(exc.problem) or "\t" in str(exc.problem):
            hint = "; indent with spaces, not tabs"
        elif "alias" in str(exc.context):
            hint = '; quote values that start with * (e.g. schedule: "*/5 * * * *")'
        context = f" ({exc.context})" if exc.context else ""
        file.problems.append(Problem(file.name, mark.line + 1 if mark else None, "",
                                     f"not valid YAML: {exc.problem}{context}{hint}"))
    except yaml.YAMLError as exc:
        file.add((), f"not valid YAML: {exc}")
    finally:
        loader.dispose()


def _walk(node: yaml.Node, loc: Loc, file: _File) -> None:
    if loc:  # a missing top-level field belongs to the whole file, not to line 1
        file.lines.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in seen and key != "<<":
                file.problems.append(Problem(file.name, line, field_path((*loc, key)),
                                             f"duplicate key; already set on line {seen[key]} (YAML would "
                                             f"silently keep only the last one)"))
            seen[key] = line
            file.lines[(*loc, key)] = line
            _walk(value_node, (*loc, key), file)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            file.lines[(*loc, index)] = item.start_mark.line + 1
            _walk(item, (*loc, index), file)


def _kind(value: Any) -> str:
    if value is None:
        return "empty (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()} (true/false)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    return repr(value)


# --- pydantic errors → problems ---------------------------------------------------------------


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model whose fields live at `loc` (JobSpec at (), Machine at ("machine",), ...)."""
    model: type[BaseModel] | None = JobSpec
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        info = model.model_fields.get(part)
        model = _model_in(info.annotation) if info else None
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


_TYPE_MESSAGES = {  # pydantic error type -> what to tell a person
    "string_type": "must be text, not {kind}; put it in quotes if needed",
    "int_type": "must be a whole number, not {kind}",
    "int_parsing": "must be a whole number, not {kind}",
    "int_from_float": "must be a whole number, not {kind}",
    "bool_type": "must be true or false, not {kind}",
    "bool_parsing": "must be true or false, not {kind}",
    "dict_type": "must be a mapping (indented key: value lines), not {kind}",
    "model_type": "must be a mapping (indented key: value lines), not {kind}",
    "model_attributes_type": "must be a mapping (indented key: value lines), not {kind}",
    "tuple_type": "must be a list, not {kind}",
    "list_type": "must be a list, not {kind}",
    "greater_than_equal": "{value!r} is too small; the smallest allowed is {ge}",
    "less_than_equal": "{value!r} is too large; the largest allowed is {le}",
}


def _report(error: Mapping[str, Any], file: _File) -> None:
    loc: Loc = tuple(p for p in error["loc"] if p != "[key]")
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    message = error["msg"].removeprefix("Value error, ")

    if kind in _TYPE_MESSAGES:
        message = _TYPE_MESSAGES[kind].format(kind=_kind(value), value=value, **ctx)
        message += _shape_hint(loc[-1:], value)
    elif kind == "extra_forbidden":
        allowed = [n for n in (_model_at(loc[:-1]) or JobSpec).model_fields if n not in INTERNAL_FIELDS]
        hint = suggest_field(str(loc[-1]), allowed)
        message = (f"unknown field; did you mean {hint!r}?" if hint
                   else f"unknown field; allowed here: {', '.join(allowed)}")
    elif kind == "missing":
        hint = _MISSING_HINTS.get(loc[-1:], "")
        message = "required field is missing" + (f"; {hint}" if hint else "")
    elif kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        hint = catalog.suggest(str(value), allowed)
        message = (f"{value!r} is not allowed; use one of {', '.join(allowed)}"
                   + (f" (did you mean {hint!r}?)" if hint else ""))
    elif kind == ENTRY_NAME_REUSED:
        return  # _check_raw reported it at the second entry's line
    elif kind == SECRETS_RULE and any(p.field.startswith(("secrets", "env", "matrix", "metadata_access"))
                                      for p in file.problems):
        return  # _check_secrets reported it at its line
    elif kind == IMAGE_MISSING:
        loc = (*loc, RULE_FIELDS[kind])
        message = f"required field is missing; {_MISSING_HINTS[('image',)]}, or build: a folder with a Dockerfile"
    elif kind in RULE_FIELDS:
        loc = (*loc, RULE_FIELDS[kind])
    elif kind != "value_error":
        message = f"{message} (got {_kind(value)})"
    file.add(loc, message)


def _shape_hint(field: Loc, value: Any) -> str:
    """What a value given in the wrong shape was most likely meant as, for the fields people flatten."""
    if field == ("machine",) and isinstance(value, str):
        return f"; a machine type goes under type: write machine: {{type: {value}}}"
    if field == ("retries",) and isinstance(value, int) and not isinstance(value, bool):
        return (f"; write retries: {{preemption: {value}}} (Spot preemptions, retried in the next zone) or "
                f"{{failure: {value}}} (a failed container)")
    if field == ("env",) and isinstance(value, list) and value and \
            all(isinstance(item, str) and "=" in item for item in value):
        pairs = ", ".join(f"{k}: {v!r}" if v else f"{k}: ''" for k, _, v in (i.partition("=") for i in value))
        return f"; write {field[0]}: {{{pairs}}}"
    return ""


# --- checks that need the cron grammar, the zone database, the catalog or the stack -------------


def _check_raw(data: dict[str, Any], file: _File) -> None:
    """Checks on the raw data, so they run even when the model rejects something else."""
    schedule = data.get("schedule")
    if isinstance(schedule, str):
        try:
            parse_schedule(schedule)
        except CronError as exc:
            file.add(("schedule",), exc.detail)
    zone = data.get("time_zone")
    if isinstance(zone, str):
        try:
            load_time_zone(zone)
        except CronError as exc:
            file.add(("time_zone",), exc.detail)
    _check_machine(data.get("machine"), ("machine",), file)
    _check_secrets(data, file)
    entries = data.get("matrix")
    if isinstance(entries, list):
        names: dict[str, int] = {}
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                continue
            _check_machine(entry.get("machine"), ("matrix", index, "machine"), file)
            name = entry.get("name")
            if isinstance(name, str) and name in names:
                file.add(("matrix", index, "name"), f"{name!r} is already the name of matrix[{names[name]}]; "
                                                    f"entry names must be unique within the job")
            elif isinstance(name, str):
                names[name] = index


def _check_secrets(data: dict[str, Any], file: _File) -> None:
    """A name in both env and secrets, a secret file in an uploaded directory, secrets shared
    through the metadata server: each at the line that says it."""
    from spotcron.core.secret_refs import file_problem

    def mapping(value: Any) -> dict[str, Any]:
        return value if isinstance(value, dict) else {}

    results = data.get("results") if isinstance(data.get("results"), str) else "/results"
    checkpoint = data.get("checkpoint") if isinstance(data.get("checkpoint"), str) else None
    env, secrets = mapping(data.get("env")), mapping(data.get("secrets"))
    places: list[tuple[Loc, dict[str, Any], dict[str, Any]]] = [((), env, secrets)]
    for index, entry in enumerate(data.get("matrix") if isinstance(data.get("matrix"), list) else []):
        if isinstance(entry, dict):
            places.append((("matrix", index), {**env, **mapping(entry.get("env"))},
                           {**secrets, **mapping(entry.get("secrets"))}))
    seen: set[Loc] = set()
    for base, env_of, secrets_of in places:
        own = mapping(data["matrix"][base[1]].get("secrets")) if base else secrets
        own_env = mapping(data["matrix"][base[1]].get("env")) if base else env
        for name in sorted(set(env_of) & set(secrets_of)):
            loc = (*base, "secrets", name) if name in own else (*base, "env", name) if name in own_env \
                else ("secrets", name)
            if loc not in seen:
                seen.add(loc)
                file.add(loc, f"{name!r} is set in both env and secrets; a variable comes from one place: keep "
                              f"it in secrets (its value then never appears in a file)")
        for name, ref in own.items():
            path = ref.get("file") if isinstance(ref, dict) else None
            problem = file_problem(path, results, checkpoint) if isinstance(path, str) else None
            if problem and path.startswith("/"):  # a relative path is the model's to report
                file.add((*base, "secrets", name, "file"), problem)
    if (secrets or any(mapping(e.get("secrets")) for e in data.get("matrix") or [] if isinstance(e, dict))) \
            and data.get("metadata_access") is True and not data.get("service_account"):
        file.add(("metadata_access",), "a job with secrets may not share the VM's identity with its container "
                                       "through spotcron's VM account: name the job's own service_account, or "
                                       "remove metadata_access")


def _check_machine(machine: Any, loc: Loc, file: _File) -> None:
    if not isinstance(machine, dict):
        return
    _check_machine_type(machine.get("type"), (*loc, "type"), file)
    gpu = machine.get("gpu")
    if isinstance(gpu, dict) and isinstance(gpu.get("type"), str):
        problem = _gpu_type_problem(gpu["type"])
        if problem:
            file.add((*loc, "gpu", "type"), problem)


def _gpu_type_problem(name: str) -> str | None:
    """Unknown or retired GPU model, whatever it is attached to."""
    gpu = catalog.gpu_type(name)
    if gpu is not None and not gpu.retired:
        return None
    problem = catalog.gpu_problem("", name, 1)
    return problem.message if problem else None


def _check_machine_type(name: Any, loc: Loc, file: _File) -> None:
    if not isinstance(name, str) or catalog.machine_type(name) is not None:
        return
    if _CUSTOM_TYPE.match(name):
        file.add(loc, f"{name!r}: custom machine types are not supported; pick a predefined type such as "
                      f"n2-standard-4 or e2-highmem-2")
        return
    sizes = _sizes_around(name)
    if sizes:
        file.add(loc, f"{name!r} is not a machine type; {sizes}")
        return
    hint = catalog.suggest(name, catalog.MACHINE_TYPES)
    families = ", ".join(sorted({m.family for m in catalog.MACHINE_TYPES.values()}))
    file.add(loc, f"{name!r} is not a machine type; did you mean {hint!r}?" if hint else
                  f"{name!r} is not a machine type spotcron knows (families: {families}); see docs/jobs.md")


def _sizes_around(name: str) -> str | None:
    """For a size a series lacks (`n1-standard-3`): the sizes on either side and the ones it has, not
    the nearest spelling (`n1-standard-32`)."""
    series, _, size = name.rpartition("-")
    if not size.isdigit() or not series:
        return None
    sizes = sorted(int(m.rpartition("-")[2]) for m in catalog.MACHINE_TYPES
                   if m.rpartition("-")[0] == series and m.rpartition("-")[2].isdigit())
    if not sizes:
        return None
    wanted = int(size)
    near = [f"{series}-{n}" for n in ([max((n for n in sizes if n < wanted), default=None),
                                       min((n for n in sizes if n > wanted), default=None)]) if n is not None]
    return (f"did you mean {' or '.join(map(repr, near))}? {series} comes in sizes "
            f"{', '.join(map(str, sizes))}")


# A run record is rewritten when its VM starts and when the run ends; the bucket's lifecycle rule
# counts a record's age from its last write, so the record must outlive one VM (timeout + grace)
# plus this margin for a late callback, a slow sweep and the rule's own daily cadence.
RETENTION_MARGIN_S = 86400


def retention_problem(timeout: int, grace: int, retention_days: int) -> str | None:
    """Why `retention_days` would delete the record of a live run of this timeout; None if it would not."""
    needed_s = timeout + grace + RETENTION_MARGIN_S
    if retention_days * 86400 >= needed_s:
        return None
    needed_days = -(-needed_s // 86400)
    return (f"{timeout}s plus the stack's grace ({grace}s) and a day's margin outlasts the stack's "
            f"results_retention_days ({retention_days}): the bucket would delete this job's run records while a "
            f"run is still live; set results_retention_days to at least {needed_days} in the stack file, or "
            f"shorten the timeout")


def _check_retention(spec: JobSpec, data: dict[str, Any], file: _File, grace: int, retention_days: int) -> None:
    problem = retention_problem(spec.timeout, grace, retention_days)
    if problem:
        file.add(("timeout",), f"{data.get('timeout', spec.timeout)!r} is {problem}")


def _check_spec(spec: JobSpec, data: dict[str, Any], file: _File, grace: int) -> None:
    """Checks that need parsed values: GPUs per resolved variant, the VM lifetime."""
    if spec.service_account is not None and data.get("metadata_access") is False:
        file.add(("metadata_access",), f"false contradicts service_account {spec.service_account!r}: a job's own "
                                       f"account reaches the container through the metadata server, so naming "
                                       f"one implies metadata_access; remove one of the two")
    total = spec.timeout + grace
    if total > MAX_RUN_SECONDS:
        file.add(("timeout",), f"{data.get('timeout')!r} plus the stack's grace ({grace}s) is {total}s, but "
                               f"Compute Engine's maxRunDuration allows at most 120 days ({MAX_RUN_SECONDS}s); "
                               f"use a timeout of at most {MAX_RUN_SECONDS - grace}s")
    elif total < MIN_RUN_SECONDS:
        file.add(("timeout",), f"{data.get('timeout')!r} plus the stack's grace ({grace}s) is {total}s, but "
                               f"Compute Engine's maxRunDuration is at least {MIN_RUN_SECONDS}s; use a timeout "
                               f"of at least {MIN_RUN_SECONDS - grace}s")

    if spec.notify is not None:
        problem = spec.notify.problem_with_timeout(spec.timeout)
        if problem:
            file.add(("notify", "slow" if spec.notify.slow is not None else "on"), problem)

    base = spec.benchmark.base
    if base is not None and spec.matrix and base not in {entry.name for entry in spec.matrix}:
        file.add(("benchmark", "base"), f"{base!r} is not a matrix entry of this job; choose one of "
                                        f"{', '.join(entry.name for entry in spec.matrix)}")
    elif base is not None and not spec.matrix:
        file.add(("benchmark", "base"), f"{base!r}: the job has no matrix, so there is nothing to compare; "
                                        f"remove benchmark.base or add matrix entries")

    suffixes = {entry.name for entry in spec.matrix}
    for index, variant in enumerate(spec.configurations()):
        clash = sorted(suffixes & {copy.run_suffix for copy in variant.repeats() if copy.repeat_index})
        if clash:
            file.add(("matrix", index, "name"), f"{clash[0]!r} names another matrix entry and a repeat of "
                                                f"{variant.variant!r} (repeats are named ENTRY-rN); rename that entry")

    seen: set[tuple[int | None, str, str]] = set()
    raw_entries = data.get("matrix") or []
    for index, variant in enumerate(spec.configurations()):
        gpu = variant.machine.gpu
        if gpu is None or _gpu_type_problem(gpu.type):
            continue  # no GPU, or an unknown one that _check_raw reported
        found = catalog.gpu_problem(variant.machine.type, gpu.type, gpu.count)
        if found is None:
            continue
        problem = found.message
        raw_machine = (raw_entries[index].get("machine") or {}) if spec.matrix else {}
        base: Loc = ("matrix", index, "machine") if spec.matrix else ("machine",)
        if "gpu" in raw_machine:
            loc = (*base, "gpu", found.field)
        elif "type" in raw_machine:
            loc = (*base, "type")
            if spec.machine.gpu is not None:
                problem += ("; the job's machine.gpu applies to every matrix entry that sets none: move it "
                            "into the entries that need it")
        else:
            loc = ("machine", "gpu")
        key = (file.line(loc), field_path(loc), problem)
        if key not in seen:
            seen.add(key)
            file.add(loc, problem)
