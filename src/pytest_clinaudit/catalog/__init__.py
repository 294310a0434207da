"""What a submission is graded against: variants, their references, the cache.

``variants`` reads and validates variant files into :class:`Variant` records
and keeps them in a :class:`Catalog`; ``references`` builds a variant's model,
audits it with :mod:`pytest_clinaudit.reference` and returns the reference
report; ``cache`` stores references as JSON keyed by what determines them;
``manifest`` reads the grader's manifest of a workspace and refuses a
reference computed on any other model or data.
"""
