"""``archsim hw list`` and ``archsim hw show NAME [--set key=value]``."""

from __future__ import annotations

import argparse

from archsim.hw.args import add_set_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("hw", help="list and show hardware presets")
    actions = parser.add_subparsers(dest="hw_action", metavar="ACTION")
    actions.required = True
    listing = actions.add_parser("list", help="list preset names")
    listing.set_defaults(func=_list)
    show = actions.add_parser("show", help="print a resolved hardware config as YAML")
    show.add_argument("name", help="preset name, YAML path, or 'local'")
    add_set_argument(show)
    show.set_defaults(func=_show)


def _list(args: argparse.Namespace) -> int:
    from archsim.hw.presets import list_presets, load_hw

    for name in list_presets():
        description = (
            load_hw(name).description if name != "local" else "the machine archsim runs on"
        )
        print(f"{name:14s} {description}")
    return 0


def _show(args: argparse.Namespace) -> int:
    import yaml

    from archsim.hw.presets import load_hw

    hw = load_hw(args.name, args.hw_set)
    data = hw.model_dump()
    derived = {"cpu.cores": hw.cpu.cores, "cpu.hw_threads": hw.cpu.hw_threads}
    if hw.gpu is not None:
        derived["gpu.fp32_peak_tflops"] = round(hw.gpu.fp32_peak_flops / 1e12, 3)
        derived["gpu.fp16_peak_tflops"] = round(hw.gpu.fp16_peak_flops / 1e12, 3)
        derived["gpu.tensor_peak_tflops"] = round(hw.gpu.tensor_peak_flops / 1e12, 3)
        if hw.gpu.fp8_flops_per_clk_per_sm > 0:  # FP8 matrix units (archsim.perf.fp8)
            derived["gpu.fp8_peak_tflops"] = round(
                hw.gpu.sms * hw.gpu.fp8_matrix_flops_per_clk_per_sm * hw.gpu.clock_mhz / 1e6, 3
            )
    print(yaml.safe_dump(data, sort_keys=False).rstrip())
    print("# derived:")
    for key, value in derived.items():
        print(f"#   {key}: {value}")
    return 0
