"""One source per code part: the starter is derived from the marked solution.

A region inside a block becomes ``raise NotImplementedError("<hint>")`` at the marker's
indentation, a top-level region disappears, the reference loses only the marker lines, and
markers that do not pair up (or a derived file that is not Python) name the file and line.
"""

from __future__ import annotations

import ast
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from generator.question import QuestionError, discover, load
from generator.starter import BEGIN, DEFAULT_HINT, END, RegionError, defines, split

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"  # the repository's bank
RING = "collectives/ring-allreduce-code"


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def run(source: str, name: str, *args):
    """Call ``name`` of ``source`` as a notebook cell defines it."""
    ns: dict = {"__name__": "notebook_cell"}
    exec(compile(source, "<derived>", "exec"), ns)
    return ns[name](*args)


MARKED = src(
    '''
    """A module docstring the student reads."""

    import math  # you may want math.sqrt


    def norm(x, y):
        """The Euclidean norm of (x, y)."""
        ### BEGIN SOLUTION your norm here
        s = x * x + y * y
        return math.sqrt(s)
        ### END SOLUTION


    if __name__ == "__main__":
        print(norm(3, 4))
    '''
)


# --- the starter and the reference -----------------------------------------------------------


def test_the_hint_becomes_the_message_at_the_markers_indentation():
    starter = split(MARKED).starter
    assert starter == MARKED.replace(
        "    ### BEGIN SOLUTION your norm here\n"
        "    s = x * x + y * y\n"
        "    return math.sqrt(s)\n"
        "    ### END SOLUTION\n",
        '    raise NotImplementedError("your norm here")\n',
    )
    with pytest.raises(NotImplementedError, match="^your norm here$"):
        run(starter, "norm", 3, 4)


def test_a_region_deeper_in_takes_its_own_indentation():
    source = src(
        """
        class Layer:
            def __init__(self, n):
                self.n = n
                ### BEGIN SOLUTION your weights here
                self.w = [0.0] * n
                ### END SOLUTION
        """
    )
    starter = split(source).starter
    assert '        raise NotImplementedError("your weights here")\n' in starter.splitlines(True)
    assert "self.n = n" in starter and "self.w" not in starter
    with pytest.raises(NotImplementedError, match="your weights here"):
        run(starter, "Layer", 3)


def test_without_hint_words_the_message_is_the_default():
    source = src(
        f"""
        def f():
            {BEGIN}
            return 1
            {END}
        """
    )
    assert split(source).starter == f'def f():\n    raise NotImplementedError("{DEFAULT_HINT}")\n'
    assert DEFAULT_HINT == "your code here"


def test_a_hint_with_quotes_and_backslashes_is_a_valid_string_literal():
    hint = "say \"hi\" \\ or 'bye', ünïcode"
    source = f"def f():\n    {BEGIN} {hint}\n    return 1\n    {END}\n"
    with pytest.raises(NotImplementedError) as err:
        run(split(source).starter, "f")
    assert str(err.value) == hint


def test_a_top_level_region_is_removed_from_the_starter():
    source = src(
        f"""
        import ast


        def calculator(text):
            {BEGIN} your calculator here
            return _evaluate(ast.parse(text, mode="eval").body)
            {END}


        {BEGIN}
        OPS = {{ast.Add: int.__add__}}


        def _evaluate(node):
            return node.value


        {END}
        if __name__ == "__main__":
            print(calculator("1"))
        """
    )
    sources = split(source)
    assert sources.starter == src(
        """
        import ast


        def calculator(text):
            raise NotImplementedError("your calculator here")


        if __name__ == "__main__":
            print(calculator("1"))
        """
    )
    assert "_evaluate" not in sources.starter and "OPS" not in sources.starter
    assert run(sources.solution, "calculator", "7") == 7  # the helpers stay in the reference


def test_the_reference_is_the_file_without_the_marker_lines():
    solution = split(MARKED).solution
    assert "### BEGIN" not in solution and "### END" not in solution
    assert solution == "".join(
        line
        for line in MARKED.splitlines(True)
        if "### BEGIN" not in line and "### END" not in line
    )
    assert run(solution, "norm", 3, 4) == 5.0


def test_several_regions_each_become_their_own_raise():
    source = src(
        f"""
        class LoRA:
            def __init__(self, r):
                super().__init__()
                {BEGIN} your layer here: self.A, self.B
                self.r = r
                {END}

            def forward(self, x):
                {BEGIN} base(x) + (alpha / r) B A x
                return x * self.r
                {END}


        def other():
            {BEGIN}
            return 2
            {END}
        """
    )
    sources = split(source)
    raises = re.findall(r"^( *)raise NotImplementedError\((.*)\)$", sources.starter, re.M)
    assert raises == [
        (" " * 8, '"your layer here: self.A, self.B"'),
        (" " * 8, '"base(x) + (alpha / r) B A x"'),
        (" " * 4, f'"{DEFAULT_HINT}"'),
    ]
    assert "super().__init__()" in sources.starter
    assert "self.r = r" in sources.solution and "return 2" in sources.solution
    assert defines(sources.starter, "LoRA") and defines(sources.starter, "other")


def test_blocks_outside_the_regions_are_the_same_in_both():
    sources = split(MARKED)
    same = [line for line in MARKED.splitlines(True) if line.strip() and "###" not in line]
    kept = {"s = x * x + y * y", "return math.sqrt(s)"}
    for line in same:
        assert line in sources.solution
        assert (line in sources.starter) == (line.strip() not in kept)


# --- errors name the file and the line -------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "line", "words"),
    [
        (
            f"def f():\n    {BEGIN}\n    x = 1\n    {BEGIN}\n    return x\n    {END}\n",
            4,
            "inside the region opened on line 2",
        ),
        (f"def f():\n    return 1\n    {END}\n", 3, "without a"),
        (f"def f():\n    {BEGIN} hint\n    return 1\n", 2, "never closed"),
    ],
    ids=["nested BEGIN", "END without BEGIN", "never closed"],
)
def test_markers_that_do_not_pair_up_name_the_file_and_line(source, line, words):
    with pytest.raises(RegionError, match=re.escape(f"topic/q/solution.py: line {line}: ")) as err:
        split(source, "topic/q/solution.py")
    assert words in str(err.value)


def test_a_file_without_a_region_is_refused():
    with pytest.raises(RegionError, match=r"^topic/q/solution\.py: no ### BEGIN SOLUTION"):
        split("def f():\n    return 1\n", "topic/q/solution.py")


def test_a_derived_starter_that_is_not_python_names_its_line():
    # a top-level region inside a block empties the block: the starter does not parse
    source = f"def f():\n    return 1\n\n\nif True:\n{BEGIN}\n    x = 1\n{END}\n"
    with pytest.raises(RegionError) as err:
        split(source, "topic/q/solution.py")
    message = str(err.value)
    assert message.startswith("topic/q/solution.py: the starter derived from it is not Python")
    assert re.search(r": line \d+: ", message), message


def test_a_solution_that_is_not_python_is_refused():
    source = f"def f(:\n    {BEGIN}\n    return 1\n    {END}\n"
    with pytest.raises(RegionError, match=r"solution\.py: the \w+ derived from it is not Python"):
        split(source, "topic/q/solution.py")


def test_loading_a_question_with_broken_markers_names_the_file_and_line(tmp_path):
    folder = tmp_path / "topic" / "ring"
    shutil.copytree(TEMPLATES / RING, folder)
    solution = folder / "solution.py"
    text = solution.read_text(encoding="utf-8")
    begin = next(i for i, s in enumerate(text.splitlines(), 1) if s.strip().startswith(BEGIN))
    solution.write_text(text.replace(f"    {END}\n", ""), encoding="utf-8")
    with pytest.raises(QuestionError, match=rf"ring/solution\.py: line {begin}: .*never closed"):
        load(folder)


def test_loading_a_question_whose_starter_loses_the_function_names_the_part(tmp_path):
    folder = tmp_path / "topic" / "ring"
    shutil.copytree(TEMPLATES / RING, folder)
    solution = folder / "solution.py"
    text = solution.read_text(encoding="utf-8")
    marked = text.replace("def ring_allreduce(", f"{BEGIN}\ndef ring_allreduce(", 1)
    marked = marked.replace("\n\nif __name__", f"\n\n{END}\nif __name__", 1)
    solution.write_text(
        marked.replace(f"    {BEGIN} your ring all-reduce here\n", "").replace(f"    {END}\n", ""),
        encoding="utf-8",
    )
    with pytest.raises(QuestionError, match="the starter derived from solution.py defines no"):
        load(folder)


# --- the bank --------------------------------------------------------------------------------


def code_parts():
    for folder in discover(TEMPLATES):
        q = load(folder)
        for part in q.spec.code:
            yield pytest.param(q, part, id=f"{folder.relative_to(TEMPLATES).as_posix()}:{part.id}")


@pytest.mark.parametrize(("q", "part"), list(code_parts()))
def test_every_code_part_derives_a_starter_that_defines_its_function(q, part):
    sources = q.code[part.id]
    assert sources.solution == split(q.files[part.solution]).solution
    for text in (sources.starter, sources.solution):
        ast.parse(text)
        assert defines(text, part.function)
        assert "### BEGIN SOLUTION" not in text and "### END SOLUTION" not in text
    assert "raise NotImplementedError(" in sources.starter
    assert len(sources.starter) < len(sources.solution)
    # one source: no hand-kept starter next to the solution
    assert not list(q.folder.glob("*starter*.py")), q.folder
