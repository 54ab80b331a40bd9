"""ScaleGrade's command line; the work is done by costmodel, generator and autograder."""
