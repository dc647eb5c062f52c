"""Normalized traces: schema, save/load, ingest of torch.profiler (Kineto) traces."""

from archsim.trace.format import Trace, load, save
from archsim.trace.schema import FORMAT_VERSION

__all__ = ["FORMAT_VERSION", "Trace", "load", "save"]
