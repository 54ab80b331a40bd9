"""The tools instructors already use: Gradescope's autograder package, nbgrader's
exchange and gradebook."""
