"""Theory (docs/paper.md §1–3): Definition 1 data, the unrolled MSSA denoiser with known or learned bases,
SNR per layer against Theorem 1's factor 1 + ητ, and the theorem's conditions."""

from aot.theory.conditions import TheoremConditions, check_conditions, min_head_dim, tau_upper_bound
from aot.theory.data import MixtureSample, orthonormal_bases, sample_mixture
from aot.theory.denoiser import hard_threshold, mssa, mssa_step, threshold_events, unroll
from aot.theory.experiment import Measurement, Trajectory, measure, run_trajectory
from aot.theory.metrics import layer_factors, match_heads, principal_angles, snr_per_cluster, snr_trajectory

__all__ = [
    "Measurement",
    "MixtureSample",
    "TheoremConditions",
    "Trajectory",
    "check_conditions",
    "hard_threshold",
    "layer_factors",
    "match_heads",
    "measure",
    "min_head_dim",
    "mssa",
    "mssa_step",
    "orthonormal_bases",
    "principal_angles",
    "run_trajectory",
    "sample_mixture",
    "snr_per_cluster",
    "snr_trajectory",
    "tau_upper_bound",
    "threshold_events",
    "unroll",
]
