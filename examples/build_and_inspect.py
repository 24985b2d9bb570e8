"""Build an AoT-MSSA language model, look at its subspaces, and compare its size with GPT-2's.

python examples/build_and_inspect.py           # the CPU preset (36 layers, d = 256)
python examples/build_and_inspect.py --tiny    # a 2-layer version (what the test suite runs)
"""

from __future__ import annotations

import argparse

import torch

from aot import build_model, preset_config


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="2 layers, for a quick check")
    args = parser.parse_args(argv)
    overrides = {"n_layer": 2} if args.tiny else {}

    mssa = build_model(preset_config("aot-mssa-l-cpu", **overrides)).eval()
    gpt2 = build_model(preset_config("gpt2-cpu", **({"n_layer": 1} if args.tiny else {}))).eval()
    print(f"AoT-MSSA: {mssa.cfg.n_layer} layers, {mssa.num_params(non_embedding=True):,} non-embedding params")
    print(f"GPT-2:    {gpt2.cfg.n_layer} layers, {gpt2.num_params(non_embedding=True):,} non-embedding params")

    # the subspace projections U_kᵀz of every token in the last layer, and the bases U_k themselves
    idx = torch.randint(0, mssa.cfg.vocab_size, (1, 32))
    last = mssa.cfg.n_layer - 1
    _, cache = mssa.run_with_cache(idx, names_filter=lambda name: name.startswith(f"blocks.{last}.attn."))
    proj = cache[f"blocks.{last}.attn.hook_subspace"]  # (B, K, T, p)
    bases = mssa.backbone.blocks[last].attn.bases().detach()  # (K, d, p)
    energy = proj.pow(2).sum(-1).mean(-1).squeeze(0)  # mean ‖U_kᵀz‖² per head
    print(f"layer {last}: subspaces of dimension p = {bases.shape[-1]} in d = {bases.shape[1]}")
    print("mean squared projection per head:", [round(float(e), 4) for e in energy])
    overlap = torch.linalg.matrix_norm(bases[0].T @ bases[1]) / bases.shape[-1] ** 0.5
    print(f"overlap of U_0 and U_1 at init (normalised Frobenius of U_0ᵀU_1): {float(overlap):.3f}")
    return {"mssa_params": mssa.num_params(non_embedding=True), "overlap": float(overlap)}


if __name__ == "__main__":
    main()
