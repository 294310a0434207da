"""Models: recipes and their artifacts, torch MLPs, and adapters behind one interface.

The face re-exports the adapters and the loader of a user's model file; recipes
are :mod:`.recipes` (pickled) and :mod:`.mlp` / :mod:`.program` (torch).
"""

from .adapters import (
    AuditedModel,
    EstimatorAdapter,
    ModelError,
    adapt_booster,
    adapt_estimator,
    adapt_model,
    adapt_torch_program,
    binary_labels,
    check_probabilities,
    match_positive_class,
)
from .loading import load_model_file

__all__ = [
    "AuditedModel",
    "EstimatorAdapter",
    "ModelError",
    "adapt_booster",
    "adapt_estimator",
    "adapt_model",
    "adapt_torch_program",
    "binary_labels",
    "check_probabilities",
    "load_model_file",
    "match_positive_class",
]
