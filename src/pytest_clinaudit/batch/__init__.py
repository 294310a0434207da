"""Grading many submissions and reporting on them, as the paper does.

``manifest`` reads the list of submissions; ``grade_many`` (a folder, one
module per job) grades each in its own pytest session, side by side, through an
``executor``; ``tables`` and ``plots`` turn the JUnit XML of graded runs into
paper-style tables and figures.
"""
