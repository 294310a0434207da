"""Print docs/nn-variants.md's reference table from the torch variants' references.

    python tools/nn_table.py                  # the WDBC, icu-synth and FLCHAIN torch variants
    python tools/nn_table.py --variants wdbc-mlp wdbc-mlp-dp

Each reference comes from the reference cache (``$CLINAUDIT_CACHE_DIR``), built
and audited first where it is missing: several minutes for the ICU and FLCHAIN variants on
2 cores. The table names the torch and Opacus versions and the CPU capability
torch picked (``ATEN_CPU_CAPABILITY`` or the machine's), because float32
kernels differ between CPUs and the trained weights with them: these numbers
are one machine's. What holds on every CPU is what the tests assert (the
ladder in tests/test_nn_ladder.py, the checklist in tests/test_nn_attacks.py).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

DEFAULT = (
    "wdbc-mlp",
    "wdbc-mlp-pgd",
    "wdbc-mlp-dp",
    "wdbc-mlp-clip",
    "icu-synth-mlp",
    "icu-synth-mlp-pgd",
    "icu-synth-mlp-dp",
    "icu-synth-mlp-clip",
    "flchain-mlp",
    "flchain-mlp-pgd",
    "flchain-mlp-dp",
    "flchain-mlp-clip",
)

COLUMNS = (
    "variant",
    "FGSM",
    "MI resistance",
    "calibration",
    "boundary",
    "SPS",
    "verdict",
    "full-test AUROC",
    "AUROC, 100 FGSM rows: clean",
    "FGSM",
    "strong PGD",
    "zero-gradient rows",
    "loss-attack AUC",
    "TPR at 1% FPR",
    "DP ε",
)


def environment() -> str:
    """One line naming what the numbers depend on: library versions and CPU kernels."""
    import os
    import platform

    import opacus  # type: ignore[import-untyped]
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    forced = os.environ.get("ATEN_CPU_CAPABILITY")
    where = f"ATEN_CPU_CAPABILITY={forced}" if forced else "the machine's default"
    return (
        f"torch {torch.__version__}, Opacus {opacus.__version__}, CPU capability "
        f"{capability} ({where}), {platform.machine()}, one intra-op thread"
    )


def row(name: str, reference: Any) -> list[str]:
    """One table row from a variant's reference report and stored probabilities."""
    from pytest_clinaudit.reference.attacks.privacy import attack_auc

    report, details = reference.report, reference.report["details"]
    c = report["components"]
    y = reference.y_test
    p = reference.test_probabilities
    full = attack_auc(
        [v for v, label in zip(p, y, strict=True) if label == 1],
        [v for v, label in zip(p, y, strict=True) if label == 0],
    )
    epsilon = (reference.training or {}).get("epsilon")
    return [
        name,
        f"{c['fgsm_robustness']:.4f}",
        f"{c['membership_inference_resistance']:.4f}",
        f"{c['calibration_ece']:.4f}",
        f"{c['boundary_attack_resistance']:.4f}",
        f"{report['sps']:.2f}",
        report["verdict"],
        f"{full:.4f}",
        f"{details['auroc_clean']:.4f}",
        f"{details['auroc_adversarial']:.4f}",
        f"{details['pgd_auroc_adversarial']:.4f}",
        f"{details['zero_gradient_fraction']:.2f}",
        f"{details['loss_attack_auc']:.4f}",
        f"{details['loss_attack_tpr_at_1pct_fpr']:.4f}",
        "" if epsilon is None else f"{epsilon:.2f}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT))
    args = parser.parse_args(argv)

    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.references import get_reference
    from pytest_clinaudit.catalog.variants import default_catalog

    catalog, cache = default_catalog(), ReferenceCache.default()
    rows = []
    for name in args.variants:
        print(f"{name} ...", file=sys.stderr, flush=True)
        reference = get_reference(
            catalog.get(name), cache=cache, progress=lambda m: print(m, file=sys.stderr)
        )
        rows.append(row(name, reference))
    print(f"Measured with {environment()}.\n")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for cells in rows:
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
