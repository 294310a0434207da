"""The task in other harnesses: what an agent receives, and how others grade it.

``workspace`` writes an agent's workspace and the grader's manifest, with
``task.md`` rendered by ``taskdoc``; ``metr`` exports a METR Task Standard
family (``metr_family`` is its TaskFamily, copied verbatim); ``inspect_task``
is the Inspect AI adapter; ``scripted_agent`` is a standalone agent that solves
the task from a workspace, used to test all of the above end to end.
"""
