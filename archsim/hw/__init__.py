"""Hardware configs: validated pydantic models, YAML presets in hwconfigs/, local detection."""

from archsim.hw.args import add_hw_arguments, hw_from_args
from archsim.hw.presets import list_presets, load_hw, presets_dir
from archsim.hw.schema import (
    CpuConfig,
    GpuConfig,
    HardwareConfig,
    HostLinkConfig,
    MemoryConfig,
    NetworkConfig,
)

__all__ = [
    "CpuConfig",
    "GpuConfig",
    "HardwareConfig",
    "HostLinkConfig",
    "MemoryConfig",
    "NetworkConfig",
    "add_hw_arguments",
    "hw_from_args",
    "list_presets",
    "load_hw",
    "presets_dir",
]
