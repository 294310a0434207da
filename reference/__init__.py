"""The reference auditor: pure numeric code, in four rooms named for their jobs.

Sub-packages, each importing only those listed before it
--------------------------------------------------------
data
    Datasets and the registry of their sources: WDBC, the synthetic ICU cohort,
    a MIMIC-IV extract, CSV files; hashing and CSV export.
attacks
    The graded semantics: parameter records, the four attacks of SPEC §3, the
    white-box attacks and membership diagnostics of §7, the SPS, and the audit
    that combines them.
models
    Model recipes and the artifacts they build (pickles and torch ``model.pt2``
    programs), and the adapters that put any model kind behind one interface.
review
    The own-data audit of a model owner's model: order-free sampling,
    diagnostics, LiRA, HopSkipJump distances and bootstrap intervals.

Importing any of it is cheap: NumPy, scikit-learn, XGBoost and torch are
imported by the functions that need them, so a grading session with a warm
reference cache never pays for them.
"""
