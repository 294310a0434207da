"""The grading core: one submission in, one grade out.

``options`` reads the command line; ``submission`` reads the untrusted file
and ``values`` every number in it; ``checks`` is the check API that graders
extend, ``schema``, ``builtin`` and ``invariants`` the checks this package
brings; ``scoring`` turns check results into a score; ``session`` runs all of
it inside a pytest session (``items`` are its test items, ``outputs`` its
score JSON and JUnit properties); ``runner`` writes such a session's arguments
and starts it in a fresh process, for every caller outside pytest.
``pytest_internals`` holds the few private pytest and Hypothesis APIs the core
relies on.

Only the standard library and pytest are imported by the modules the plugin
loads on every run; the rest load once ``--submission`` is given.
"""
