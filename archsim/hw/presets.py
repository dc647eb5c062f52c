"""Load hardware configs: a preset name from ``hwconfigs/``, a YAML path, or ``local``; apply
``--set key=value`` overrides. Every problem is an ArchsimError naming the file and the key.
"""

from __future__ import annotations

import copy
import importlib.resources
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from archsim.errors import ArchsimError
from archsim.hw.limits import check_hw_power, check_hw_ranges
from archsim.hw.schema import HardwareConfig

LOCAL = "local"
_PRESET_SUFFIX = ".yaml"


def presets_dir() -> Path:
    """The ``hwconfigs`` folder: the installed package data, else the checkout's top-level folder."""
    try:
        found = Path(str(importlib.resources.files("hwconfigs")))
        if found.is_dir():
            return found
    except ModuleNotFoundError:
        pass
    return Path(__file__).resolve().parents[2] / "hwconfigs"


def list_presets() -> list[str]:
    """Preset names (file stems in hwconfigs/) plus ``local``."""
    names = sorted(p.stem for p in presets_dir().glob(f"*{_PRESET_SUFFIX}"))
    return [*names, LOCAL]


def _format_validation_error(source: str, exc: ValidationError) -> str:
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "(top level)"
    kind = first["type"]
    if kind == "missing":
        detail = "is missing"
    elif kind == "extra_forbidden":
        detail = "is not a known key"
    else:
        got = repr(first.get("input"))
        got = got if len(got) <= 80 else f"{got[:60]}...({len(got):,} characters)"
        detail = f"{first['msg']} (got {got})"
    more = f" (and {len(exc.errors()) - 1} more problems)" if len(exc.errors()) > 1 else ""
    return f"{source}: key {key} {detail}{more}"


def validate_hw(data: Any, source: str) -> HardwareConfig:
    """Validate a parsed mapping as a HardwareConfig; errors name ``source`` and the key."""
    if not isinstance(data, dict):
        raise ArchsimError(f"{source}: expected a mapping with sections cpu, gpu, host_link, ...")
    _refuse_booleans(data, source)
    try:
        hw = HardwareConfig.model_validate(data)
    except ValidationError as exc:
        raise ArchsimError(_format_validation_error(source, exc)) from None
    check_hw_ranges(hw, source)  # documented ranges (docs/LIMITS.md), before any work
    check_hw_power(hw, source)  # idle within TDP
    return hw


def _refuse_booleans(data: dict[str, Any], source: str) -> None:
    """A YAML ``yes``/``true`` where a number goes: pydantic would read it as 1 (``gpu.sms: yes``
    would be one SM)."""
    from archsim.hw.limits import HW_RANGES

    for key in HW_RANGES:
        section, _, field = key.partition(".")
        value = data.get(section)
        value = value.get(field) if isinstance(value, dict) else None
        if isinstance(value, bool):
            raise ArchsimError(f"{source}: key {key} is {str(value).lower()} (expected a number)")


@lru_cache(maxsize=64)
def _parsed_yaml(text: str) -> Any:
    """The YAML document of ``text``, parsed once per distinct text: pure-Python PyYAML takes about
    3 ms a preset, and the model, sweeps and tests load the same few presets thousands of times.
    Callers get a deep copy (overrides edit the mapping in place)."""
    from archsim.hw.strict_yaml import safe_load_unique

    return safe_load_unique(text)


def _read_yaml(path: Path) -> Any:
    from archsim.hw.strict_yaml import read_yaml_text

    try:
        return copy.deepcopy(_parsed_yaml(read_yaml_text(path)))
    except yaml.YAMLError as exc:
        from archsim.hw.strict_yaml import yaml_refusal

        raise ArchsimError(yaml_refusal(path, exc)) from None
    except OSError as exc:
        raise ArchsimError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ArchsimError(
            f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
            "expected a YAML hardware config"
        ) from None


def _resolve(name_or_path: str) -> tuple[dict[str, Any], str]:
    if not name_or_path.strip():  # Path("") is ".", a folder: say what was given instead
        raise ArchsimError(
            f"{name_or_path!r}: expected a hardware preset name ({', '.join(list_presets())}) "
            "or a path to a .yaml file"
        )
    if name_or_path == LOCAL:
        from archsim.hw.local import detect_local

        return detect_local().model_dump(), "local (detected)"
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.exists():
            raise ArchsimError(f"{path}: hardware config file does not exist")
        return _read_yaml(path), str(path)
    preset = presets_dir() / f"{name_or_path}{_PRESET_SUFFIX}"
    if not preset.is_file():
        raise ArchsimError(
            f"{name_or_path}: unknown hardware preset (expected one of {', '.join(list_presets())}, "
            "or a path to a .yaml file)"
        )
    return _read_yaml(preset), str(preset)


def _coerce_scalar(text: str) -> Any:
    """YAML scalar parsing, so ``40`` is an int, ``1.5`` a float, ``null`` None; pydantic checks types."""
    try:
        from archsim.hw.strict_yaml import safe_load_unique

        return safe_load_unique(text)
    except yaml.YAMLError:  # `[[[[...` or aliases that expand to 10^9 nodes: the text, refused
        return text


def apply_overrides(data: dict[str, Any], overrides: Sequence[str], source: str) -> dict[str, Any]:
    """Apply ``section.key=value`` strings to a config mapping; unknown keys are errors."""
    for item in overrides:
        if "=" not in item:
            raise ArchsimError(f"--set {item[:80]}: expected key=value, e.g. gpu.sms=40")
        key, _, raw = item.partition("=")
        if not raw.strip():  # `--set gpu.clock_mhz=$EMPTY` would be YAML null: cleared silently
            raise ArchsimError(
                f"--set {item.strip()[:80]}: no value after '=' (give a number, or null to clear an "
                "optional field)"
            )
        parts = key.strip().split(".")
        node: Any = data
        model: type[BaseModel] | None = HardwareConfig
        for depth, part in enumerate(parts):
            fields = model.model_fields if model is not None else {}
            if part not in fields:
                raise ArchsimError(
                    f"--set {key[:80]}: {source} has no key {'.'.join(parts[: depth + 1])[:80]}"
                )
            if depth == len(parts) - 1:
                node[part] = _coerce_scalar(raw.strip())
                break
            if node.get(part) is None:
                raise ArchsimError(f"--set {key[:80]}: {source} has no {part} section (null)")
            if not isinstance(node.get(part), dict):
                raise ArchsimError(
                    f"--set {key[:80]}: {'.'.join(parts[: depth + 1])[:80]} is not a section in "
                    f"{source}"
                )
            node = node[part]
            model = _section_model(model, part)
    return data


def _section_model(model: type[BaseModel], field: str) -> type[BaseModel] | None:
    annotation = model.model_fields[field].annotation
    for candidate in getattr(annotation, "__args__", (annotation,)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def load_hw(name_or_path: str, overrides: Sequence[str] = ()) -> HardwareConfig:
    """A validated HardwareConfig from a preset name, a YAML path or ``local``, with overrides."""
    data, source = _resolve(name_or_path)
    if isinstance(data, dict) and overrides:
        for item in overrides:
            if item.partition("=")[0].strip() == "cpu.base_clock_mhz":
                raise ArchsimError(
                    "--set cpu.base_clock_mhz: the base clock is descriptive and changes no output; "
                    "a faster core is cpu.boost_clock_mhz (thread speed x boost / the part's boost) "
                    "or cpu.thread_speed_rel"
                )
        data = _with_boost_clock(apply_overrides(_with_card_figures(data), overrides, source))
        data = _with_larger_part_limits(
            data, {item.partition("=")[0].strip() for item in overrides}
        )
        # a bad value given with --set is not in the file: say where it came from
        source += " with " + " ".join(f"--set {item.strip()[:80]}" for item in overrides)
    return validate_hw(data, source)


# What-if fields whose part's value the models keep: section -> {field: the part's field}.
# gpu.sms: --sms / --set gpu.sms disable SMs of the same card (archsim.perf.power) instead of
# making a smaller card; gpu.dram_latency_ns: the same card's measured kernel floor (and the fixed
# cost in it) stays (archsim.perf.dispatch_overhead); the clock, bandwidth, cores and threads: the
# power model's budgets are the part's (archsim.perf.power).
CARD_FIGURES = {
    "gpu": {
        "sms": "physical_sms",
        "dram_latency_ns": "card_dram_latency_ns",
        "clock_mhz": "card_clock_mhz",
        "dram_bw_gbs": "card_dram_bw_gbs",
        "idle_power_w": "card_idle_power_w",
        "max_power_w": "card_max_power_w",
    },
    "cpu": {
        "cores_per_socket": "physical_cores_per_socket",
        "threads_per_core": "physical_threads_per_core",
        "thread_speed_rel": "physical_thread_speed_rel",
        "boost_clock_mhz": "physical_boost_clock_mhz",
        "idle_power_w": "physical_idle_power_w",
        "max_power_w": "physical_max_power_w",
    },
}
# Thread speeds a what-if boost clock scales (_with_boost_clock).
CPU_SPEEDS = ("thread_speed_rel", "emulator_speed_rel", "interpreter_speed_rel", "simd_speed_rel")


def _with_boost_clock(data: dict[str, Any]) -> dict[str, Any]:
    """A what-if ``cpu.boost_clock_mhz`` runs the part's threads boost / the part's boost faster:
    the presets derive ``thread_speed_rel`` as that boost clock over the capture machine's times an
    IPC ratio (hwconfigs/dgx1-v100.yaml), so at one IPC speed follows the clock. The scale is
    applied once: the part's boost then reads the what-if's, and ``physical_thread_speed_rel``
    keeps the part's speed for the power model (its cores draw clock / the part's clock more)."""
    cpu = data.get("cpu")
    if not isinstance(cpu, dict):
        return data
    boost, part = cpu.get("boost_clock_mhz"), cpu.get("physical_boost_clock_mhz")
    if not (_is_number(boost) and _is_number(part)) or boost == part or boost <= 0 or part <= 0:
        return data
    scaled = {k: cpu[k] * boost / part for k in CPU_SPEEDS if _is_number(cpu.get(k))}
    return {**data, "cpu": {**cpu, **scaled, "physical_boost_clock_mhz": boost}}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _with_card_figures(data: dict[str, Any]) -> dict[str, Any]:
    """The config with the part's figures kept (``CARD_FIGURES``) where it does not say, before
    overrides: ``--set gpu.clock_mhz`` then runs the same card's SMs at another clock (its SM power
    scales with it), ``--set gpu.dram_bw_gbs`` leaves the SMs' power alone, and fewer
    ``cpu.cores_per_socket`` or ``cpu.threads_per_core`` disable some of the same socket's."""
    out = data
    for section, fields in CARD_FIGURES.items():
        part = data.get(section)
        if not isinstance(part, dict):
            continue
        card = {}
        for field, card_field in fields.items():
            value = part.get(field)
            if _is_number(value) and part.get(card_field) is None:
                card[card_field] = value
        if card:
            out = {**out, section: {**part, **card}}
    return out


def _with_larger_part_limits(data: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    """A what-if with more SMs, cores or SMT threads than the part is a larger part of the same
    units: each draws what one of the part's draws (archsim.perf.power spreads the part's budget
    over the part's units), and its TDP grows by the added units' share of that budget, so every
    unit busy at the part's clock draws exactly it, as on the part (``local`` scales a server
    part's TDP to the cores it sees alike). A ``max_power_w`` the same ``--set`` names is kept: a
    limit, which archsim.sim.power_cap holds by the clock. Before, the part's TDP was spread over
    the what-if's units, so each drew less the more there were (jetson-tx1, R2D2, 64 actors: the
    same 8,704 frames/s drew 3.0 W of CPU at 16 cores, 1.9 W at 64, where 8 drew 7.5 W)."""
    from archsim.perf.power import full_load_cores, gpu_dynamic_w

    out = data
    gpu = data.get("gpu")
    if isinstance(gpu, dict) and "gpu.max_power_w" not in keys:
        sms, card = gpu.get("sms"), gpu.get("physical_sms")
        idle, tdp = gpu.get("card_idle_power_w"), gpu.get("card_max_power_w")
        bw, pj = gpu.get("card_dram_bw_gbs"), gpu.get("dram_pj_per_bit") or 0.0
        if all(_is_number(v) for v in (sms, card, idle, tdp, bw, pj)) and sms > card > 0:
            # what the card's SMs all busy draw above idle, its DRAM's share of the budget aside
            sm_w = float(gpu_dynamic_w(1.0, 0.0, idle, tdp, bw, pj)[0])
            out = {**out, "gpu": {**gpu, "max_power_w": tdp + sm_w * (sms / card - 1)}}
    cpu = data.get("cpu")
    if isinstance(cpu, dict) and "cpu.max_power_w" not in keys:
        figures = [
            cpu.get(k)
            for k in (
                "cores_per_socket",
                "threads_per_core",
                "physical_cores_per_socket",
                "physical_threads_per_core",
                "physical_idle_power_w",
                "physical_max_power_w",
            )
        ]
        if all(_is_number(v) for v in figures):
            cores, threads, part_cores, part_threads, idle, tdp = figures
            grown = full_load_cores(cores, threads) / max(
                full_load_cores(part_cores, part_threads), 1e-12
            )
            if grown > 1:
                limit_w = tdp + max(tdp - idle, 0.0) * (grown - 1)
                out = {**out, "cpu": {**cpu, "max_power_w": limit_w}}
    return out
