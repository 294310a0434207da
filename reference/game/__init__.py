"""The auditing game (SPEC §8): a zoo of models with planted defects, and their measurements.

Grader-side knowledge: how each kind is planted, the defining measurements the
build makes on every model, and the margins that make the ground truth
unambiguous. Nothing here is written into an agent's workspace but the
exported programs and the public data.
"""
