"""Grading one submission: the key a student's answers are compared with (``keys``), the
comparison of a number with its unit, tolerance, misconceptions and carried credit
(``compare``), the code checks of a question (``checks``, written with
:mod:`autograder.checklib`), the harvest graded into a :class:`grade.StudentResult`
(``grade``), and the sandbox run that produces it (``submission``)."""
