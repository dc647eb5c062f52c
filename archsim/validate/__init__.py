"""Validation of archsim against real runs of this machine (issue 6): capture one baseline trace per
workload, run the real workloads at other configurations, and compare with the simulator's
predictions made from the baseline trace alone."""
