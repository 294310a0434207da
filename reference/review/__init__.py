"""The own-data review: a model owner's audit with intervals and a reviewer's diagnostics."""
