"""archsim: trace-driven architecture simulator for deep RL training on CPU-GPU systems."""

__version__ = "0.1.0"
