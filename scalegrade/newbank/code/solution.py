"""The mean of a list.  TODO: the student reads this docstring: state the contract."""


def mean_of(xs: list[float]) -> float:
    """The arithmetic mean of ``xs`` (a non-empty list of floats)."""
    ### BEGIN SOLUTION your mean here
    return sum(xs) / len(xs)
    ### END SOLUTION
